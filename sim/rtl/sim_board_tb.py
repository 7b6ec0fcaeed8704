"""``netblt sim-board``'s testbench: the board's design under Verilator, its Ethernet port
bridged to two UDP sockets on loopback.

Datagrams to the link socket reach the board's host link, and those to the NETBLT
socket its NETBLT port, each in an Ethernet frame from the sender's own address and
port; the board's answers go back out of the socket its source port belongs to. With
``--transport ip``, NETBLT natively on IP protocol 30 is bridged too, through a raw
socket: the packets on loopback whose NETBLT destination port is the board's go in, and
the board's protocol-30 packets go out to their destination. ARP
requests are answered for every address but the board's, as a router would. Frames to
anything but loopback are dropped and counted: a simulated board's addresses live only
inside its frames. NETBLT datagrams, each way, cross a WAN path model (sim/wan/netem.py's)
in simulated time: the board's timers and CYCLES see its delay as a board on a long
path would (the host link is local, and not delayed). The run ends with a summary when
``netblt sim-board`` is interrupted or terminated (it creates the file
NETBLT_SIM_BOARD_STOP names), and when it is gone. With a pace, the simulation waits
whenever it is ahead of that many times real time, and says how far it ever fell behind.
"""

from __future__ import annotations

import heapq
import ipaddress
import itertools
import json
import os
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles
from cocotb.utils import get_sim_time
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether

from ...driver.transport import Transport, TransportError
from ...formats import host_link as F, rfc998 as L
from ...formats.rfc998 import IP_PROTOCOL
from ...formats.boards import IP_ADDRESS, MAC_ADDRESS
from ..drops import DropReport
from ..wan.netem import Path as WanPath, PathConfig, describe
from .ethernet_wire import HOST_MAC, GmiiWire, udp_payload

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
thousands of times slower than the datagrams that reach its sockets)."""


TO_BOARD, TO_PEER = "to the board", "to the peer"


class Wan:
    """The path between the board's NETBLT port and its peers, a model each way, in
    simulated time: a datagram waits here until the model says it arrives."""

    def __init__(self, config: PathConfig, seed: int) -> None:
        self.config = config
        self.paths = {TO_BOARD: WanPath(config, seed), TO_PEER: WanPath(config, seed + 1)}
        self.waiting: list[tuple[float, int, bytes, Callable[[bytes], Awaitable[None]]]] = []
        self.order = itertools.count()  # same arrival time: first sent, first out

    def send(self, way: str, datagram: bytes, deliver: Callable[[bytes], Awaitable[None]]) -> None:
        for at, copy in self.paths[way].send(datagram, now()):
            heapq.heappush(self.waiting, (at, next(self.order), copy, deliver))

    async def deliver_due(self) -> None:
        while self.waiting and self.waiting[0][0] <= now():
            _, _, datagram, deliver = heapq.heappop(self.waiting)
            await deliver(datagram)

    def summary(self) -> list[str]:
        lines = [f"WAN: {describe(self.config)}"]
        for way, path in self.paths.items():
            counts = ", ".join(f"{what} {count}" for what, count in sorted(path.counts.items()))
            lines.append(f"  NETBLT datagrams {way}: {counts or 'none'}")
        return lines


def now() -> float:
    """Simulated seconds."""
    return get_sim_time("ns") / 1e9


class Bridge(GmiiWire):
    """The wire's far end: frames to and from UDP sockets on loopback."""

    def attach(self, sockets: dict[int, socket.socket], mtu: int, wan: Wan, native: socket.socket | None = None,
               netblt_port: int = 0) -> None:
        """``sockets``: the board's UDP port each one stands for; ``native``: a raw socket
        for IP protocol 30, whose packets to ``netblt_port`` are the board's; NETBLT
        datagrams (those of ``netblt_port``) cross ``wan``."""
        self.sockets, self.mtu, self.wan, self.native, self.netblt_port = sockets, mtu, wan, native, netblt_port
        self.counts: Counter[str] = Counter()

    async def arrived(self, packet: Ether) -> None:
        if ARP in packet:
            if packet[ARP].op == 1 and packet[ARP].pdst != IP_ADDRESS:
                await self.answer_arp(packet)
            return
        native = self.native is not None and IP in packet and packet[IP].proto == IP_PROTOCOL
        if not native and UDP not in packet:
            carried = IP in packet and packet[IP].proto == IP_PROTOCOL
            self.counts["from the board, NETBLT natively on IP, which only sim-board --transport ip carries (dropped)"
                        if carried else "from the board, neither UDP nor NETBLT on IP (dropped)"] += 1
            return
        if not native and packet[UDP].sport not in self.sockets:
            self.counts[f"from the board's UDP port {packet[UDP].sport}, which is not bridged: the host's "
                        f"--local-port {self.netblt_port} gives the board the one that is (dropped)"] += 1
            return
        destination = packet[IP].dst
        if not ipaddress.ip_address(destination).is_loopback:
            self.counts[f"from the board to {destination}, not loopback (dropped)"] += 1
            return
        if native:
            out, to = self.native, (destination, 0)
            datagram = bytes(packet[IP].payload)[:packet[IP].len - 4 * packet[IP].ihl]
        else:
            out, to, datagram = self.sockets[packet[UDP].sport], (destination, packet[UDP].dport), udp_payload(packet)

        async def deliver(datagram: bytes) -> None:
            try:
                out.sendto(datagram, to)
                self.counts["datagrams out"] += 1
            except OSError:
                self.counts["datagrams out that the host refused"] += 1

        if native or packet[UDP].sport == self.netblt_port:
            self.wan.send(TO_PEER, datagram, deliver)
        else:
            await deliver(datagram)

    async def poll(self) -> None:
        """Datagrams waiting on the sockets into the board, and those the WAN delivers now."""
        for port, sock in self.sockets.items():
            for _ in range(BATCH):
                try:
                    data, (address, source_port) = sock.recvfrom(65536)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                await self._arrive(port, data, lambda data, address=address, source_port=source_port, port=port:
                             self._carry(IP(src=address, dst=IP_ADDRESS) / UDP(sport=source_port, dport=port) / data))
        for _ in range(BATCH if self.native is not None else 0):
            try:
                datagram, (address, _) = self.native.recvfrom(65536)
            except BlockingIOError:
                break
            data = datagram[4 * (datagram[0] & 0x0F):]  # a raw socket's datagrams come with their IP header
            port = L.HEADER.field("foreign_port")
            if int.from_bytes(data[port.offset:port.end], "big") == self.netblt_port:
                await self._arrive(self.netblt_port, data, lambda data, address=address:
                             self._carry(IP(src=address, dst=IP_ADDRESS, proto=IP_PROTOCOL) / data))
        await self.wan.deliver_due()

    async def _arrive(self, port: int, data: bytes, carry: Callable[[bytes], Awaitable[None]]) -> None:
        """A datagram for the board's ``port``: NETBLT's cross the WAN, the host link's do not."""
        if port == self.netblt_port:
            self.wan.send(TO_BOARD, data, carry)
        else:
            await carry(data)

    async def _carry(self, packet: IP) -> None:
        """One datagram onto the board's wire, as a switch port would: dropped when over
        the MTU or when the port's queue is full."""
        if len(packet) > self.mtu:
            self.counts[f"datagrams in over the {self.mtu}-byte MTU (dropped)"] += 1
        elif self.source.count() >= WIRE_QUEUE:
            self.counts["datagrams in while the board's wire was full (dropped)"] += 1
        else:
            self.counts["datagrams in"] += 1
            await self.send(Ether(dst=MAC_ADDRESS, src=HOST_MAC) / packet)


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        print(f"netblt sim-board: error: cannot listen on 127.0.0.1:{port}: {exc.strerror}", file=sys.stderr,
              flush=True)
        os._exit(1)  # one line, no simulator traceback
    sock.setblocking(False)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    return sock


def raw() -> socket.socket:
    """A raw socket for NETBLT natively on IP (protocol 30), on loopback."""
    try:
        transport = Transport("ip", ("127.0.0.1", 0))
    except TransportError as exc:
        print(f"netblt sim-board: error: {exc}", file=sys.stderr, flush=True)
        os._exit(1)  # one line, no simulator traceback
    transport.sock.setblocking(False)
    return transport.sock


@cocotb.test()
async def serve(dut):
    settings = json.loads(os.environ["NETBLT_SIM_BOARD"])
    link, netblt = bind(settings["link_port"]), bind(settings["netblt_port"])
    stop, asked = [], Path(os.environ["NETBLT_SIM_BOARD_STOP"])
    for number in (signal.SIGINT, signal.SIGTERM):  # the terminal's Ctrl-C reaches this process too
        signal.signal(number, lambda *_: stop.append(True))
    pcap = Path(settings["pcap"]) if settings["pcap"] else None
    bridge = await Bridge.create(dut, None, pcap)
    netblt_port = netblt.getsockname()[1]
    native = raw() if settings["transport"] == "ip" else None
    wan = Wan(PathConfig(delay=settings["wan_delay"], loss=settings["wan_loss"]), settings["wan_seed"])
    bridge.attach({F.LINK_PORT: link, netblt_port: netblt}, settings["mtu"], wan, native, netblt_port)
    drops = DropReport(bridge.counts)
    clock_hz = settings["clock_hz"]
    print(f"management 127.0.0.1:{link.getsockname()[1]}", flush=True)  # the host link: --board, board status
    print(f"netblt 127.0.0.1:{netblt_port} (the board's NETBLT UDP port is {netblt_port}"
          + (", natively on IP protocol 30 too)" if native else ")"), flush=True)
    if wan.config != PathConfig():
        print(f"WAN between the board's NETBLT port and its peers: {describe(wan.config)}, in simulated time",
              flush=True)
    started, begun_ns = time.monotonic(), get_sim_time("ns")
    told, pace = False, Pace(settings["pace"])
    step = PACE_CYCLES if pace.times else POLL_CYCLES
    while not stop and os.getppid() == settings["parent"]:  # ends with netblt sim-board
        if asked.exists():
            break
        await bridge.poll()
        for _ in range(POLL_CYCLES // step):
            await ClockCycles(dut.clk, step)
            pace.keep(time.monotonic() - started, (get_sim_time("ns") - begun_ns) / 1e9)
        if (line := drops.line(time.monotonic())) is not None:
            print(line, flush=True)
        if not told and time.monotonic() - started > 2:
            told = True
            print(f"time runs {ratio(started, begun_ns):,.0f} times slower than real time "
                  f"({clock_hz / 1e6:g} MHz simulated)", flush=True)
    wall, simulated = time.monotonic() - started, (get_sim_time("ns") - begun_ns) / 1e9
    print(f"simulated {simulated:.4f} s in {wall:.1f} s of real time "
          f"(1 : {ratio(started, begun_ns):,.0f})", flush=True)
    if pace.times:
        print(f"held at 1 : {pace.times:,}; behind it by {pace.most_behind:.2f} s of real time at most",
              flush=True)
    for what, count in sorted(bridge.counts.items()):
        print(f"  {what}: {count}", flush=True)
    for line in wan.summary():
        print(line, flush=True)
    for sock in (link, netblt, native):
        if sock is not None:
            sock.close()


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


def ratio(started: float, begun_ns: float) -> float:
    simulated = (get_sim_time("ns") - begun_ns) / 1e9
    return (time.monotonic() - started) / simulated if simulated else float("inf")
