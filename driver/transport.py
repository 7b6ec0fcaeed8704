"""Datagram sockets for NETBLT: inside UDP (default) or natively on IP protocol 30."""

from __future__ import annotations

import socket
from typing import Literal

from netblt.host.layout import IP_PROTOCOL

DEFAULT_PORT = 2998
"""The UDP port (and, natively on IP, the NETBLT port) a receiver listens on by default."""
SOCKET_BUFFER = 8 << 20

Kind = Literal["udp", "ip"]


class TransportError(OSError):
    """A socket that cannot be opened or used; the message is meant for the user."""


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT`` or ``:PORT`` -> (IPv4 address, port)."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = text, ""
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise TransportError(f"bad port in {text!r}") from None
    if not 0 <= port <= 0xFFFF:
        raise TransportError(f"port {port} is outside 0..65535")
    try:
        address = socket.gethostbyname(host or "0.0.0.0")
    except OSError:
        raise TransportError(f"cannot resolve host {host!r}") from None
    return address, port


class Transport:
    """One socket and the peer it talks to; NETBLT ports are the UDP ports in UDP mode."""

    def __init__(self, kind: Kind, local: tuple[str, int], peer: tuple[str, int] | None) -> None:
        self.kind = kind
        self.peer = peer
        try:
            if kind == "udp":
                self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            else:
                self.sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, IP_PROTOCOL)
        except PermissionError:
            raise TransportError("native NETBLT (IP protocol 30) needs a raw socket: run as root "
                                 "or with CAP_NET_RAW, or use --transport udp") from None
        for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
            self.sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        try:
            self.sock.bind(local if kind == "udp" else (local[0], 0))
        except OSError as exc:
            self.sock.close()
            raise TransportError(f"cannot listen on {local[0]}:{local[1]}: {exc.strerror}") from None
        self.local_port = self.sock.getsockname()[1] if kind == "udp" else local[1]
        self.sock.settimeout(0.05)
        self.locked = False
        if peer is not None:
            self.lock()

    @property
    def peer_port(self) -> int:
        return self.peer[1] if self.peer else 0

    def lock(self) -> None:
        """From now on talk only to ``peer`` (the kernel filters other senders in UDP mode)."""
        self.locked = True
        if self.kind == "udp":
            self.sock.connect(self.peer)

    def send(self, parts: list) -> None:
        if self.locked and self.kind == "udp":
            self.sock.sendmsg(parts)
        else:
            self.sock.sendmsg(parts, [], 0, (self.peer[0], self.peer[1] if self.kind == "udp" else 0))

    def receive(self, buf: bytearray) -> memoryview | None:
        """One datagram's NETBLT bytes, or None on a timeout or a datagram not for us."""
        try:
            n, address = self.sock.recvfrom_into(buf)
        except TimeoutError:
            return None
        view = memoryview(buf)[:n]
        if self.kind == "ip":
            # A raw socket sees every protocol-30 datagram on the host, its own included:
            # keep those addressed to our NETBLT port.
            view = view[(view[0] & 0x0F) * 4:] if n else view
            if len(view) < 10 or int.from_bytes(view[8:10], "big") != self.local_port:
                return None
            if self.locked and address[0] != self.peer[0]:
                return None
        if not self.locked:
            self.peer = (address[0], address[1] if self.kind == "udp" else 0)
        return view

    def close(self) -> None:
        self.sock.close()
