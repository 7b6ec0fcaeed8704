"""Datagram sockets for NETBLT: inside UDP (default) or natively on IP protocol 30.

A socket is never connected: every datagram received comes with its source, and the
protocol core decides who the peer is (the address opened to, or the source of the OPEN it
accepted). ICMP errors are read from the socket's error queue together with the
address of the datagram that drew them, so an error about anyone but the peer changes
nothing. Addresses are ``(host, port)``; natively on IP the port is 0.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import math
import os
import select
import socket
import struct
import time
from collections.abc import Hashable, Iterator, Sequence
from typing import Literal

from ..formats import ethernet
from ..formats.rfc998 import IP_PROTOCOL
from .framing import HEADER_SIZE

DEFAULT_PORT = 2998
"""The UDP port (and, natively on IP, the NETBLT port) a receiver listens on by default."""
MTU = 1500
"""The path MTU a sender's default DATA packets fill."""
SEND_BUFFER = 8 << 20
RECEIVE_BUFFER = 32 << 20
"""DATA queued for a receiver that lost the CPU for a moment: at a gigabit Linux's usual
limit (net.core.rmem_max, 4 MiB) covers some 35 ms, and a receiver sharing a busy host
dropped thousands of packets a GB past it, each sent again. As root the socket gets this
much whatever the limit (SO_RCVBUFFORCE); otherwise what the limit allows."""
SO_RCVBUFFORCE = 33
"""Linux: SO_RCVBUF past net.core.rmem_max, for a process with CAP_NET_ADMIN."""
UDP_SEGMENT, UDP_GRO = 103, 104
"""Linux UDP segmentation offload: one system call carries many datagrams each way."""
SO_TIMESTAMPNS = 35
"""Linux: each datagram carries the time the kernel took it in (struct timespec, the
system clock)."""
_TIMESPEC = struct.Struct("@ll")
_ANCILLARY = socket.CMSG_SPACE(4) + socket.CMSG_SPACE(_TIMESPEC.size)
"""Room for a read's coalescing size and arrival time."""
WAIT = 0.05
"""Seconds a read waits for something to come before it returns nothing."""
IP_RECVERR, IPV6_RECVERR = 11, 25
"""Linux: queue ICMP errors with the datagram that drew them (not in Python's socket module)."""
_RECVERR = {(socket.IPPROTO_IP, IP_RECVERR), (socket.IPPROTO_IPV6, IPV6_RECVERR)}
"""Where an error queue's message says what the error was (a timestamp may come with it)."""
IP_MTU_DISCOVER, IPV6_MTU_DISCOVER, PMTUDISC_DO = 10, 23, 2
"""Linux: never fragment this socket's datagrams (one too large for the interface fails
with EMSGSIZE); not in Python 3.11's socket module."""
GSO_MAX_SEGMENTS, GSO_MAX_BYTES = 64, 65000
_GSO_SIZE = struct.Struct("=H")
_GRO_SIZE = struct.Struct("=i")
_EXTENDED_ERR = struct.Struct("=I4xI")
"""Linux's struct sock_extended_err: ee_errno, then (past origin, type, code and pad)
ee_info, which for "fragmentation needed" is the MTU the router can pass."""
TOO_LARGE = "larger than the path's MTU"
"""What an ICMP "fragmentation needed" (EMSGSIZE) says about the datagram that drew it."""
ICMP_ERRORS = {errno.ECONNREFUSED: "port unreachable", errno.EHOSTUNREACH: "host unreachable",
               errno.ENETUNREACH: "network unreachable", errno.EPROTO: "protocol unreachable",
               errno.EMSGSIZE: TOO_LARGE}

Kind = Literal["udp", "ip"]
Address = tuple[str, int]


def socket_address(address: Hashable) -> Address:
    """An address the protocol core passed on, as a socket takes it: the core's are opaque
    to it (any hashable value; sim/wan/virtual.py's are names), a socket's are (host, port)."""
    if isinstance(address, tuple) and len(address) == 2 and isinstance(address[0], str) \
            and isinstance(address[1], int):
        return address[0], address[1]
    raise TypeError(f"{address!r} is not a socket address")


class TransportError(OSError):
    """A socket that cannot be opened or used; the message is meant for the user."""


def overhead(host: str, kind: str) -> int:
    """Bytes around a DATA packet's data to numeric ``host``: the IP header (40 for IPv6,
    20 for IPv4, mapped addresses included), UDP's 8 for ``kind`` udp, NETBLT's header."""
    address = ipaddress.ip_address(host.partition("%")[0])
    ip = 40 if address.version == 6 and address.ipv4_mapped is None else 20
    return ip + (8 if kind == "udp" else 0) + HEADER_SIZE


def default_packet_size(host: str, kind: str) -> int:
    """DATA bytes a packet to ``host`` carries by default, filling :data:`MTU`: 1448 over
    UDP and IPv4, 1456 natively on IP, 1428 to IPv6 (1448 there made 1520-byte datagrams)."""
    return MTU - overhead(host, kind)


SIOCGIFADDR = 0x8915
"""Linux: the ioctl that reads an interface's IPv4 address."""


def line_data_bps(speed_bps: float, host: str, kind: str, packet_size: int) -> float:
    """Bits/s of NETBLT data an Ethernet line of ``speed_bps`` carries to numeric ``host``
    in ``packet_size`` packets, each framed on the wire."""
    return speed_bps * packet_size / (packet_size + overhead(host, kind) + ethernet.FRAMING)


def link_speed_bps(host: str) -> float | None:
    """The speed in bits/s the system reports for the interface a datagram to numeric
    ``host`` leaves by; None where it reports none (loopback, a tunnel, a VM's virtio)."""
    name = _outgoing_interface(host)
    if name is None:
        return None
    try:
        with open(f"/sys/class/net/{name}/speed") as f:
            megabits = int(f.read())
    except (OSError, ValueError):
        return None
    return megabits * 1e6 if megabits > 0 else None


def _outgoing_interface(host: str) -> str | None:
    """The interface holding the local address that the route to ``host`` picks."""
    address = ipaddress.ip_address(host.partition("%")[0])
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((host, DEFAULT_PORT))  # chooses a route and a source; sends nothing
            local = ipaddress.ip_address(probe.getsockname()[0].partition("%")[0])
            if family == socket.AF_INET6:
                with open("/proc/net/if_inet6") as f:
                    return next((fields[5] for fields in map(str.split, f)
                                 if ipaddress.IPv6Address(int(fields[0], 16)) == local), None)
            for _, name in socket.if_nameindex():
                try:
                    reply = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("16s16x", name.encode()[:15]))
                except OSError:
                    continue  # no IPv4 address on it
                if ipaddress.IPv4Address(reply[20:24]) == local:
                    return name
    except OSError:
        pass
    return None


def parse_address(text: str, default_port: int = DEFAULT_PORT) -> Address:
    """``HOST``, ``HOST:PORT``, ``:PORT``, ``[V6]:PORT`` or a bare IPv6 address -> (address, port)."""
    text = text.strip()
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or rest and not rest.startswith(":"):
            raise TransportError(f"bad address {text!r}: use [IPv6]:PORT")
        port_text = rest[1:]
    elif text.count(":") > 1:
        host, port_text = text, ""
    else:
        host, _, port_text = text.partition(":")
    try:
        port = int(port_text) if port_text else default_port
    except ValueError:
        raise TransportError(f"bad port in {text!r}") from None
    if not 0 <= port <= 0xFFFF:
        raise TransportError(f"port {port} is outside 0..65535")
    if not host:
        return "", port
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except OSError:
        raise TransportError(f"cannot resolve host {host!r}") from None
    # Prefer IPv4 where a name has both, as the rest of the path most likely does.
    family, *_, sockaddr = min(info, key=lambda entry: entry[0] != socket.AF_INET)
    return str(sockaddr[0]), port


def show(address: Address | None) -> str:
    """An address as a user writes it: IPv4 as is (also when mapped into IPv6), IPv6 in brackets."""
    if address is None:
        return "nobody"
    host, port = address[:2]
    ip = ipaddress.ip_address(host.split("%")[0]) if host else None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        host = str(ip.ipv4_mapped)
    elif isinstance(ip, ipaddress.IPv6Address):
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


def host_address(address: Address) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The IP address of ``address``, IPv4 when it is mapped into IPv6."""
    ip = ipaddress.ip_address(address[0].split("%")[0])
    return ip.ipv4_mapped or ip if isinstance(ip, ipaddress.IPv6Address) else ip


class Transport:
    """One socket; NETBLT ports are the UDP ports in UDP mode.

    ``local`` with an empty host binds every address: IPv6 and IPv4 together where the
    host has IPv6, else IPv4; ``family`` picks one (a sender takes its peer's).
    ``share`` lets other UDP sockets of this user bind the same port (a receiving
    station's, host/station.py): "open" claims a port nobody holds, "join" one opened so;
    a joined socket is then kept to one sender (:meth:`keep_to`).
    """

    def __init__(self, kind: Kind, local: Address, family: int | None = None, *,
                 share: Literal["", "open", "join"] = "") -> None:
        self.kind = kind
        host, port = local
        if family is None:
            family = _family_of(host) if host else (socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET)
        if kind == "ip" and family == socket.AF_INET6 and host:
            raise TransportError("native NETBLT (IP protocol 30) runs on IPv4 only: use --transport udp "
                                 "for IPv6")
        if kind == "ip":
            family = socket.AF_INET
        self.family = family
        try:
            if kind == "udp":
                self.sock = socket.socket(family, socket.SOCK_DGRAM)
            else:
                self.sock = socket.socket(family, socket.SOCK_RAW, IP_PROTOCOL)
        except PermissionError:
            raise TransportError("native NETBLT (IP protocol 30) needs a raw socket: run as root "
                                 "or with CAP_NET_RAW, or use --transport udp") from None
        except OSError as exc:
            raise TransportError(f"cannot open a socket: {exc.strerror}") from None
        if family == socket.AF_INET6:
            self.sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            self.sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVERR, 1)
        self.sock.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        deep_receive_queue(self.sock)
        bind_host = host or ("::" if family == socket.AF_INET6 else "0.0.0.0")
        try:
            if share == "open":
                _unheld(family, (bind_host, port))
            if share:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            self.sock.bind((bind_host, port if kind == "udp" else 0))
        except OSError as exc:
            self.sock.close()
            raise TransportError(f"cannot listen on {show((bind_host, port))}: {exc.strerror}") from None
        self.local_port = self.sock.getsockname()[1] if kind == "udp" else port
        self.sock.settimeout(WAIT)
        self.offload = kind == "udp" and coalesce(self.sock)
        if self.offload:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self._clock = (-math.inf, 0.0)
            """When time.monotonic's clock last was set against the kernel's, and by how much."""
        self._reader = socket.socket(fileno=os.dup(self.sock.fileno()))
        """The socket again, read without Python's poll before each call (:meth:`receive`)."""
        self._reader.settimeout(0.0)
        self._waking = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        """Readable once :meth:`wake` was called: a read waiting ends at once."""
        self._readable = select.poll()
        self._readable.register(self._reader, select.POLLIN)
        self._readable.register(self._waking, select.POLLIN)
        self.arrival: float | None = None
        """When the kernel took in what :meth:`receive` last brought, on time.monotonic's
        clock (None where it does not say): a receiver that was kept from running reads a
        backlog at once, and would time the path by when it read it."""
        self.path_mtu: int | None = None
        """The MTU the last "fragmentation needed" named (a router's, or this host's own)."""

    def keep_to(self, peer: Address) -> list[tuple[bytes, Address]]:
        """Take datagrams from ``peer`` only: on a shared port the kernel then brings this
        socket that sender's and the others' to the rest (a connected socket is the better
        match). Datagrams may still be sent to anyone. Returns every datagram that came
        before, with its source: until then the kernel may hand the socket any sender's."""
        self.sock.connect(self.destination(peer))
        came: list[tuple[bytes, Address]] = []
        while True:
            try:
                each, source = datagrams(self._reader)
            except BlockingIOError:
                return came
            except OSError:  # an ICMP error about another socket's datagram, brought here alike
                self.errors()
                continue
            came += [(datagram, source) for datagram in each]

    def address(self, given: Address) -> Address:
        """``given`` as this socket reports sources: natively on IP the port is the peer's
        NETBLT port, not part of its address."""
        return given if self.kind == "udp" else (given[0], 0)

    def destination(self, to: Address) -> Address:
        """Where the socket sends for ``to``; IPv4 peers are mapped on an IPv6 socket."""
        host, port = to
        if self.family == socket.AF_INET6 and ":" not in host:
            host = f"::ffff:{host}"
        return host, port if self.kind == "udp" else 0

    def send(self, parts: list[bytes | memoryview], to: Address) -> None:
        self.sock.sendmsg(parts, [], 0, self.destination(to))

    def send_segments(self, view: memoryview, segment: int, to: Address) -> None:
        """Datagrams of ``segment`` bytes back to back (the last may be shorter), in one
        system call where segmentation offload allows (at most :data:`GSO_MAX_SEGMENTS`
        and :data:`GSO_MAX_BYTES`); each is still one datagram on the wire."""
        if self.offload and len(view) > segment:
            self.sock.sendmsg([view], segmented(segment), 0, self.destination(to))
            return
        for at in range(0, max(len(view), 1), segment):  # an empty datagram is a datagram too
            self.send([view[at:at + segment]], to)

    def receive(self, buf: bytearray) -> tuple[memoryview, int, Address | None]:
        """The NETBLT datagrams one system call brings (several of ``segment`` bytes each,
        the last maybe shorter, when the kernel coalesced them) and their source; nothing
        on a timeout or when nothing was for us.

        Raises ConnectionRefusedError (or another OSError) when an ICMP error arrived:
        :meth:`errors` says about whom.
        """
        self.arrival = None
        if self.offload:
            return self._receive_offloaded(buf)
        nothing = memoryview(buf)[:0], 0, None
        try:
            n, address = self._reader.recvfrom_into(buf)
        except BlockingIOError:
            self._wait()
            return nothing
        view = memoryview(buf)[:n]
        if self.kind == "ip":
            # A raw socket sees every protocol-30 datagram on the host, its own included:
            # keep those addressed to our NETBLT port.
            view = view[(view[0] & 0x0F) * 4:] if n else view
            if len(view) < 10 or int.from_bytes(view[8:10], "big") != self.local_port:
                return nothing
            return view, 0, (address[0], 0)
        return view, 0, address[:2]

    def _wait(self) -> None:
        """Nothing waits to be read: wait as long as the socket's timeout (WAIT; not at all
        where set non-blocking) for something to come, or for :meth:`wake`. Reading the
        non-blocking handle first is one system call where something waits (a socket with
        a timeout polls before each read, which was a quarter of a receiver's data path at
        80,000 datagrams a second)."""
        if (wait := self.sock.gettimeout()) != 0.0:
            self._readable.poll(None if wait is None else wait * 1000)

    def _receive_offloaded(self, buf: bytearray) -> tuple[memoryview, int, Address | None]:
        """:meth:`receive` with coalescing and the kernel's arrival times."""
        try:
            n, ancillary, _flags, address = self._reader.recvmsg_into([buf], _ANCILLARY)
        except BlockingIOError:
            self._wait()
            return memoryview(buf)[:0], 0, None
        for level, kind, data in ancillary:
            if kind == SO_TIMESTAMPNS and level == socket.SOL_SOCKET:
                seconds, nanoseconds = _TIMESPEC.unpack_from(data)
                now = time.monotonic()
                set_at, offset = self._clock
                if now - set_at > 1.0:  # the wall clock may be stepped: set again each second
                    set_at, offset = self._clock = now, _monotonic_less_wall()
                self.arrival = min(now, offset + seconds + nanoseconds * 1e-9)
        return memoryview(buf)[:n], _coalesced_size(ancillary), address[:2]

    def errors(self) -> list[tuple[Address | None, str]]:
        """The queued ICMP errors: the address of the datagram that drew each, and what it said."""
        out: list[tuple[Address | None, str]] = []
        while True:
            try:
                _, ancillary, _, address = self.sock.recvmsg(1, 1024, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
            except (BlockingIOError, TimeoutError, InterruptedError):
                return out
            except OSError as exc:
                out.append((None, exc.strerror or str(exc)))
                return out
            code, info = next((_EXTENDED_ERR.unpack_from(data) for level, kind, data in ancillary
                               if (level, kind) in _RECVERR and len(data) >= _EXTENDED_ERR.size), (0, 0))
            what = ICMP_ERRORS.get(code) or (errno.errorcode.get(code, "ICMP error").lower())
            if code == errno.EMSGSIZE and info:
                self.path_mtu = info
            host, port = address[:2]
            out.append(((host, port if self.kind == "udp" else 0), what))

    def wake(self) -> None:
        """End a read waiting in another thread now, and every read after it at once: the
        transport is closing. Its thread would otherwise wait out :data:`WAIT` (50 ms a
        file of a directory sent, both ends)."""
        os.eventfd_write(self._waking, 1)

    def close(self) -> None:
        self._reader.close()
        os.close(self._waking)
        self.sock.close()


def segmented(segment: int) -> list[tuple[int, int, bytes]]:
    """The ancillary data that has one sendmsg carry datagrams of ``segment`` bytes."""
    return [(socket.SOL_UDP, UDP_SEGMENT, _GSO_SIZE.pack(segment))]


def _family_of(host: str) -> int:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host.split("%")[0]).version == 6 else socket.AF_INET
    except ValueError:
        return socket.AF_INET


def _unheld(family: int, where: Address) -> None:
    """Raise OSError (EADDRINUSE) when a socket holds ``where``, shared or not: SO_REUSEPORT
    alone would let a second station of the same user share the port unseen."""
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        if family == socket.AF_INET6:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        probe.bind(where)


def deep_receive_queue(sock: socket.socket) -> None:
    """:data:`RECEIVE_BUFFER` of queue for datagrams that come while the process is busy:
    past the system's limit as root, else what the limit allows."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)


def system_drops(sock: socket.socket) -> int | None:
    """Datagrams the system dropped for ``sock`` with its queue full (Linux's /proc/net/udp
    and udp6, found by the socket's inode); None where it does not say."""
    inode = str(os.fstat(sock.fileno()).st_ino)
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as rows:
                for row in rows:
                    fields = row.split()
                    if len(fields) > 12 and fields[9] == inode:
                        return int(fields[12])
        except OSError:
            continue
    return None


def coalesce(sock: socket.socket) -> bool:
    """Turn on UDP receive coalescing; False on kernels without segmentation offload."""
    try:
        sock.setsockopt(socket.SOL_UDP, UDP_GRO, 1)
    except OSError:
        return False
    return True


def datagrams(sock: socket.socket) -> tuple[list[bytes], Address]:
    """The datagrams one read of a coalescing socket (:func:`coalesce`) brings, each as it
    was sent, and their source. Raises BlockingIOError when nothing waits."""
    data, ancillary, _flags, source = sock.recvmsg(1 << 16, socket.CMSG_SPACE(_GRO_SIZE.size))
    segment = _coalesced_size(ancillary) or len(data) or 1
    return [data[at:at + segment] for at in range(0, max(len(data), 1), segment)], source[:2]


def waiting_datagrams(sock: socket.socket) -> list[bytes]:
    """Every datagram waiting on a non-blocking coalescing socket, without blocking, each as
    it was sent."""
    came: list[bytes] = []
    while True:
        try:
            each, _ = datagrams(sock)
        except BlockingIOError:
            return came
        came += each


def _coalesced_size(ancillary: list[tuple[int, int, bytes]]) -> int:
    """The size of each datagram a coalesced read joined (the last may be shorter); 0 where
    the read brought one datagram as it was sent."""
    return next((_GRO_SIZE.unpack_from(data)[0] for level, kind, data in ancillary
                 if level == socket.SOL_UDP and kind == UDP_GRO), 0)


def segment_runs(sizes: Sequence[int]) -> Iterator[tuple[int, int]]:
    """Where runs of datagrams of these sizes begin and end, each run one segmented send:
    its datagrams as long as its first but the last (which may be shorter, not empty),
    within :data:`GSO_MAX_SEGMENTS` and :data:`GSO_MAX_BYTES`; an empty datagram alone."""
    start = 0
    while start < len(sizes):
        first, end = sizes[start], start + 1
        total = first
        while (first and end < len(sizes) and end - start < GSO_MAX_SEGMENTS and 0 < sizes[end] <= first
               and total + sizes[end] <= GSO_MAX_BYTES):
            total += sizes[end]
            end += 1
            if sizes[end - 1] < first:
                break  # a shorter one ends a run
        yield start, end
        start = end


def _monotonic_less_wall() -> float:
    """time.monotonic() less time.time(), from the tightest of three brackets of a wall
    clock read by two monotonic ones: a thread that lost the CPU between two plain reads
    would put that while into every arrival time until the next."""
    brackets = []
    for _ in range(3):
        before, wall, after = time.monotonic(), time.time(), time.monotonic()
        brackets.append((after - before, (before + after) / 2 - wall))
    return min(brackets)[1]
