"""Datagram sockets for NETBLT: inside UDP (default) or natively on IP protocol 30."""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence
from typing import Literal

from netblt.host.layout import IP_PROTOCOL

DEFAULT_PORT = 2998
"""The UDP port (and, natively on IP, the NETBLT port) a receiver listens on by default."""
SOCKET_BUFFER = 8 << 20
UDP_SEGMENT, UDP_GRO = 103, 104
"""Linux UDP segmentation offload: one system call carries many datagrams each way."""
GSO_MAX_SEGMENTS, GSO_MAX_BYTES = 64, 65000
_GSO_SIZE = struct.Struct("=H")
_GRO_SIZE = struct.Struct("=i")

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
        self.offload = kind == "udp" and _try_offload(self.sock)
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

    def send_many(self, datagrams: Sequence[list]) -> None:
        """Send datagrams (each a list of parts) in as few system calls as segmentation
        offload allows: runs of equal-sized datagrams, the last of a run may be shorter."""
        if not (self.offload and self.locked):
            for parts in datagrams:
                self.send(parts)
            return
        sizes = [sum(map(len, parts)) for parts in datagrams]
        start = 0
        while start < len(datagrams):
            size = sizes[start]
            end, total = start + 1, size
            while (end < len(datagrams) and end - start < GSO_MAX_SEGMENTS
                   and total + size <= GSO_MAX_BYTES):
                this = sizes[end]
                if this > size:
                    break
                total += this
                end += 1
                if this < size:
                    break
            parts = [p for datagram in datagrams[start:end] for p in datagram]
            if end - start == 1:
                self.sock.sendmsg(parts)
            else:
                self.sock.sendmsg(parts, [(socket.SOL_UDP, UDP_SEGMENT, _GSO_SIZE.pack(size))])
            start = end

    def receive(self, buf: bytearray) -> list[memoryview]:
        """The NETBLT datagrams one system call brings (several when the kernel coalesced
        them); empty on a timeout or when nothing was for us."""
        if self.offload:
            try:
                n, ancillary, _flags, address = self.sock.recvmsg_into([buf], socket.CMSG_SPACE(4))
            except TimeoutError:
                return []
            view = memoryview(buf)[:n]
            if not self.locked:
                self.peer = address
            for level, kind, data in ancillary:
                if level == socket.SOL_UDP and kind == UDP_GRO:
                    size = _GRO_SIZE.unpack(data[:4])[0]
                    return [view[at:at + size] for at in range(0, n, size)]
            return [view]
        try:
            n, address = self.sock.recvfrom_into(buf)
        except TimeoutError:
            return []
        view = memoryview(buf)[:n]
        if self.kind == "ip":
            # A raw socket sees every protocol-30 datagram on the host, its own included:
            # keep those addressed to our NETBLT port.
            view = view[(view[0] & 0x0F) * 4:] if n else view
            if len(view) < 10 or int.from_bytes(view[8:10], "big") != self.local_port:
                return []
            if self.locked and address[0] != self.peer[0]:
                return []
        if not self.locked:
            self.peer = (address[0], address[1] if self.kind == "udp" else 0)
        return [view]

    def close(self) -> None:
        self.sock.close()


def _try_offload(sock: socket.socket) -> bool:
    """Turn on UDP receive coalescing; False on kernels without segmentation offload."""
    try:
        sock.setsockopt(socket.SOL_UDP, UDP_GRO, 1)
    except OSError:
        return False
    return True
