"""``netblt sim-board``'s bridge: the simulated board's Ethernet port (sim/rtl/harness.py)
joined to two UDP sockets on loopback.

Datagrams to the link socket reach the board's host link, and those to the NETBLT
socket its NETBLT port, each in an Ethernet frame from the sender's own address and
port; the board's answers go back out of the socket its source port belongs to. With
``--transport ip``, NETBLT natively on IP protocol 30 is bridged too, through a raw
socket: the packets on loopback whose NETBLT destination port is the board's go in, and
the board's protocol-30 packets go out to their destination. ARP requests are answered
for every address but the board's, as a router would. Frames to anything but loopback
are dropped and counted: a simulated board's addresses live only inside its frames.
NETBLT datagrams, each way, cross a WAN path model (sim/wan/netem.py's) in simulated
time: the board's timers and CYCLES see its delay as a board on a long path would (the
host link is local, and not delayed). Every frame goes to the pcap, stamped with the
simulated time it was handed to the board's wire or its last byte left the board. The
run ends with a summary at SIGINT or SIGTERM. With a pace, the simulation waits whenever
it is ahead of that many times real time, and says how far it ever fell behind.
"""

from __future__ import annotations

import heapq
import ipaddress
import itertools
import signal
import socket
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from scapy.layers.l2 import ARP, Ether

from ...driver.transport import Transport, TransportError
from ...formats import host_link as F, rfc998 as L
from ...formats.boards import IP_ADDRESS, MAC_ADDRESS
from ...formats.rfc998 import IP_PROTOCOL
from .. import frames
from ..drops import DropReport
from ..wan.netem import Path as WanPath, PathConfig, describe
from .harness import HOST_MAC, Harness

POLL_CYCLES = 250
"""System-clock cycles between looks at the sockets (5 us at 50 MHz)."""
PACE_CYCLES = 25
"""System-clock cycles between looks at the pace: steps small enough (5 ms of real time
at 1:10,000) for a host to measure the board's clock within a few percent at once."""
BATCH = 16
"""Datagrams taken from one socket per look."""
WIRE_QUEUE = 32
"""Frames waiting for the board's wire at most, as in a switch port's buffer: more than
the wire carries is dropped and counted, never queued without end (a simulated board is
slower than the datagrams that reach its sockets)."""
WATCH_EVERY = 0.05
"""Real seconds between looks at the drops and the speed."""

TO_BOARD, TO_PEER = "to the board", "to the peer"


class Wan:
    """The path between the board's NETBLT port and its peers, a model each way, in
    simulated time (``now``): a datagram waits here until the model says it arrives."""

    def __init__(self, config: PathConfig, seed: int, now: Callable[[], float]) -> None:
        self.config, self.now = config, now
        self.paths = {TO_BOARD: WanPath(config, seed), TO_PEER: WanPath(config, seed + 1)}
        self.waiting: list[tuple[float, int, bytes, Callable[[bytes], None]]] = []
        self.order = itertools.count()  # same arrival time: first sent, first out

    def send(self, way: str, datagram: bytes, deliver: Callable[[bytes], None]) -> None:
        for at, copy in self.paths[way].send(datagram, self.now()):
            heapq.heappush(self.waiting, (at, next(self.order), copy, deliver))

    def deliver_due(self) -> None:
        while self.waiting and self.waiting[0][0] <= self.now():
            _, _, datagram, deliver = heapq.heappop(self.waiting)
            deliver(datagram)

    def summary(self) -> list[str]:
        lines = [f"WAN: {describe(self.config)}"]
        for way, path in self.paths.items():
            counts = ", ".join(f"{what} {count}" for what, count in sorted(path.counts.items()))
            lines.append(f"  NETBLT datagrams {way}: {counts or 'none'}")
        return lines


class Bridge:
    """The wire's far end: frames to and from UDP sockets on loopback. ``sockets``: the
    board's UDP port each one stands for; ``native``: a raw socket for IP protocol 30,
    whose packets to ``netblt_port`` are the board's; NETBLT datagrams (those of
    ``netblt_port``) cross ``wan``."""

    def __init__(self, board: Harness, sockets: dict[int, socket.socket], mtu: int, wan: Wan,
                 native: socket.socket | None, netblt_port: int, pcap: Path | None) -> None:
        self.board, self.sockets, self.mtu, self.wan = board, sockets, mtu, wan
        self.native, self.netblt_port = native, netblt_port
        self.pcap = None if pcap is None else frames.Pcap(pcap, frames.LINKTYPE_ETHERNET, sync=True)
        self.counts: Counter[str] = Counter()

    def collect(self) -> None:
        """The frames the board sent, each acted on."""
        for frame, at in self.board.take():
            self.record(frame, at)
            self.arrived(frame)
        if self.board.bad_frames:
            self.counts["frames from the board whose FCS did not hold (dropped)"] = self.board.bad_frames

    def arrived(self, frame: bytes) -> None:
        if frames.ethertype(frame) == frames.ETHERTYPE_ARP:
            self.answer(Ether(frame))
            return
        packet = frames.datagram(frame)
        native = self.native is not None and packet is not None and packet.protocol == IP_PROTOCOL
        if not native and (packet is None or packet.protocol != frames.UDP_PROTOCOL):
            carried = packet is not None and packet.protocol == IP_PROTOCOL
            self.counts["from the board, NETBLT natively on IP, which only sim-board --transport ip carries (dropped)"
                        if carried else "from the board, neither UDP nor NETBLT on IP (dropped)"] += 1
            return
        if not native and packet.source_port not in self.sockets:
            self.counts[f"from the board's UDP port {packet.source_port}, which is not bridged: the host's "
                        f"--local-port {self.netblt_port} gives the board the one that is (dropped)"] += 1
            return
        if not ipaddress.ip_address(packet.destination).is_loopback:
            self.counts[f"from the board to {packet.destination}, not loopback (dropped)"] += 1
            return
        if native:
            out, to = self.native, (packet.destination, 0)
        else:
            out, to = self.sockets[packet.source_port], (packet.destination, packet.destination_port)

        def deliver(datagram: bytes) -> None:
            try:
                out.sendto(datagram, to)
                self.counts["datagrams out"] += 1
            except OSError:
                self.counts["datagrams out that the host refused"] += 1

        if native or packet.source_port == self.netblt_port:
            self.wan.send(TO_PEER, packet.payload, deliver)
        else:
            deliver(packet.payload)

    def answer(self, request: Ether) -> None:
        """An ARP request for any address but the board's answered, as a router would."""
        if ARP not in request:
            self.counts["from the board, ARP cut short (dropped)"] += 1
        elif request[ARP].op == 1 and request[ARP].pdst != IP_ADDRESS:
            self.send(bytes(Ether(dst=request.src, src=HOST_MAC) / ARP(
                op=2, hwsrc=HOST_MAC, psrc=request[ARP].pdst, hwdst=request.src, pdst=request[ARP].psrc)))

    def poll(self) -> None:
        """Datagrams waiting on the sockets into the board, and those the WAN delivers now."""
        for port, sock in self.sockets.items():
            for _ in range(BATCH):
                try:
                    data, (address, source_port) = sock.recvfrom(65536)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                self._arrive(port, data, lambda data, address=address, source_port=source_port, port=port:
                             self._carry(frames.udp(address, IP_ADDRESS, source_port, port, data)))
        for _ in range(BATCH if self.native is not None else 0):
            try:
                datagram, (address, _) = self.native.recvfrom(65536)
            except BlockingIOError:
                break
            data = datagram[4 * (datagram[0] & 0x0F):]  # a raw socket's datagrams come with their IP header
            port = L.HEADER.field("foreign_port")
            if int.from_bytes(data[port.offset:port.end], "big") == self.netblt_port:
                self._arrive(self.netblt_port, data, lambda data, address=address:
                             self._carry(frames.ipv4(address, IP_ADDRESS, IP_PROTOCOL, data)))
        self.wan.deliver_due()

    def _arrive(self, port: int, data: bytes, carry: Callable[[bytes], None]) -> None:
        """A datagram for the board's ``port``: NETBLT's cross the WAN, the host link's do not."""
        if port == self.netblt_port:
            self.wan.send(TO_BOARD, data, carry)
        else:
            carry(data)

    def _carry(self, packet: bytes) -> None:
        """One IP datagram onto the board's wire, as a switch port would: dropped when over
        the MTU or when the port's queue is full."""
        if len(packet) > self.mtu:
            self.counts[f"datagrams in over the {self.mtu}-byte MTU (dropped)"] += 1
        elif self.board.queued() >= WIRE_QUEUE:
            self.counts["datagrams in while the board's wire was full (dropped)"] += 1
        else:
            self.counts["datagrams in"] += 1
            self.send(frames.ethernet(MAC_ADDRESS, HOST_MAC, frames.ETHERTYPE_IPV4, packet))

    def send(self, frame: bytes) -> None:
        self.record(frame, self.board.now)
        self.board.send(frame)

    def record(self, frame: bytes, at: float) -> None:
        """Into the pcap, stamped with simulated time ``at`` to the nanosecond."""
        if self.pcap is not None:
            self.pcap.write(frame, at)


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise BridgeError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    return sock


def raw() -> socket.socket:
    """A raw socket for NETBLT natively on IP (protocol 30), on loopback."""
    try:
        transport = Transport("ip", ("127.0.0.1", 0))
    except TransportError as exc:
        raise BridgeError(str(exc)) from None
    transport.sock.setblocking(False)
    return transport.sock


class BridgeError(RuntimeError):
    """The bridge cannot open its sockets; the message is one line for the user."""


def serve(board: Harness, settings: dict) -> None:
    """Bridge ``board`` to loopback as ``settings`` say (host/sim_commands.py's) until
    SIGINT or SIGTERM, then print a summary."""
    sockets = [bind(settings["link_port"]), bind(settings["netblt_port"])]
    link, netblt = sockets
    if settings["transport"] == "ip":
        sockets.append(raw())
    native = sockets[2] if len(sockets) > 2 else None
    stop: list[int] = []
    previous = {number: signal.signal(number, lambda number, _: stop.append(number))
                for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        netblt_port = netblt.getsockname()[1]
        wan = Wan(PathConfig(delay=settings["wan_delay"], loss=settings["wan_loss"]), settings["wan_seed"],
                  lambda: board.now)
        pcap = Path(settings["pcap"]) if settings["pcap"] else None
        bridge = Bridge(board, {F.LINK_PORT: link, netblt_port: netblt}, settings["mtu"], wan, native, netblt_port,
                        pcap)
        say(f"management 127.0.0.1:{link.getsockname()[1]}")  # the host link: --board, board status
        say(f"netblt 127.0.0.1:{netblt_port} (the board's NETBLT UDP port is {netblt_port}"
            + (", natively on IP protocol 30 too)" if native else ")"))
        if wan.config != PathConfig():
            say(f"WAN between the board's NETBLT port and its peers: {describe(wan.config)}, in simulated time")
        _run(board, bridge, Pace(settings["pace"]), settings["clock_hz"], stop)
        for what, count in sorted(bridge.counts.items()):
            say(f"  {what}: {count}")
        for line in wan.summary():
            say(line)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for sock in sockets:
            sock.close()


def _run(board: Harness, bridge: Bridge, pace: Pace, clock_hz: float, stop: list[int]) -> None:
    """The simulation's loop until a signal: the sockets looked at every POLL_CYCLES."""
    drops = DropReport(bridge.counts)
    started, begun = time.monotonic(), board.now
    watched, told = started, False
    step = PACE_CYCLES if pace.times else POLL_CYCLES
    while not stop:
        bridge.poll()
        for _ in range(POLL_CYCLES // step):
            board.run(step)
            pace.keep(time.monotonic() - started, board.now - begun)
        bridge.collect()
        if (wall := time.monotonic()) - watched >= WATCH_EVERY:
            watched = wall
            if (line := drops.line(wall)) is not None:
                say(line)
            if not told and wall - started > 2:
                told = True
                say(f"time runs {ratio(wall - started, board.now - begun):,.0f} times slower than real time "
                    f"({clock_hz / 1e6:g} MHz simulated)")
    wall, simulated = time.monotonic() - started, board.now - begun
    say(f"simulated {simulated:.4f} s in {wall:.1f} s of real time (1 : {ratio(wall, simulated):,.0f})")
    if pace.times:
        say(f"held at 1 : {pace.times:,}; behind it by {pace.most_behind:.2f} s of real time at most")


class Pace:
    """Simulated time held at ``times`` slower than real time (0: not held)."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.most_behind = 0.0
        """Real seconds the simulation was ever late on its pace: a pace it could not keep."""

    def keep(self, wall: float, simulated: float) -> None:
        if self.times:
            ahead = simulated * self.times - wall
            if ahead > 0:
                time.sleep(ahead)
            else:
                self.most_behind = max(self.most_behind, -ahead)


def ratio(wall: float, simulated: float) -> float:
    return wall / simulated if simulated else float("inf")


def say(line: str) -> None:
    print(line, flush=True)
