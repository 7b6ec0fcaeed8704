"""The testbench's end of an Ethernet link to the integrated top (hw/node.py on GMII).

cocotbext-eth's GMII models carry the frames; scapy builds and reads them as an
independent stack would, every frame goes to a pcap for Wireshark (stamped in the
simulation's nanoseconds), ARP requests for the host are answered, and ``LinkPort`` is
a host on the host link: driver/link.py's own client, its datagrams carried in these
frames (and some lost, when a test says so).
"""

from __future__ import annotations

import random
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.queue import Queue
from cocotb.triggers import ClockCycles, with_timeout
from cocotb.utils import get_sim_time, get_time_from_sim_steps
from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import checksum

from ...driver.link_client import LinkClient
from ...formats import host_link as F
from ...formats.boards import IP_ADDRESS, MAC_ADDRESS
from ..frames import LINKTYPE_ETHERNET, Pcap
from . import hdl
from .harness import HOST_MAC
from .testbench import start

HOST_IP = "192.168.1.2"
HOST_LINK_PORT = 40990


class GmiiWire:
    """The testbench's end of the GMII link: frames each way, in a pcap, and ARP
    requests for the host's address answered as a host's stack would."""

    def __init__(self, dut, pcap: Path | None) -> None:
        self.source = GmiiSource(dut.gmii__rx_data, dut.gmii__rx_er, dut.gmii__rx_dv,
                                 dut.gmii__rx_clk, dut.gmii__reset)
        self.sink = GmiiSink(dut.gmii__tx_data, dut.gmii__tx_er, dut.gmii__tx_en,
                             dut.gmii__tx_clk, dut.gmii__reset)
        self.pcap = None if pcap is None else Pcap(pcap, LINKTYPE_ETHERNET, sync=True)
        self.dut = dut
        self.frames: Queue[Ether] = Queue()
        self.asked: list[tuple[float, str]] = []
        """Every ARP request from the board: when (ns), and for which address."""
        self.replies: Queue[Ether] = Queue()
        """Host-link datagrams (replies and pushes), apart from the engine's traffic."""
        cocotb.start_soon(self._collect())

    @classmethod
    async def create(cls, dut, test: str | None, pcap: Path | None = None) -> GmiiWire:
        """The wire, after a reset; its frames go to ``pcap``, or to build/gateware/pcap/``test``.pcap."""
        if pcap is None and test is not None:
            (hdl.BUILD / "pcap").mkdir(parents=True, exist_ok=True)
            pcap = hdl.BUILD / "pcap" / f"{test}.pcap"
        # The PHY's clocks run from power-up, through the node's reset: LiteEth's transmit
        # enable, a register its Verilog gives no initial value, is set by its own clock.
        Clock(dut.gmii__rx_clk, 8, unit="ns").start()
        Clock(dut.gmii__tx_clk, 8, unit="ns").start()
        await start(dut, gmii__reset=1, link_up=1)  # link_up: the PHY's link, as a board's MDIO reads it
        wire = cls(dut, pcap)
        await ClockCycles(dut.clk, 10)
        dut.gmii__reset.value = 0
        await ClockCycles(dut.clk, 10)
        return wire

    def record(self, frame: Ether, at_ns: float | None = None) -> None:
        """Into the pcap, stamped with simulation time (now, or ``at_ns``)."""
        if self.pcap is not None:
            frame.time = (get_sim_time("ns") if at_ns is None else at_ns) / 1e9
            self.pcap.write(bytes(frame), frame.time)

    async def send(self, frame: Ether) -> None:
        self.record(frame)
        await self.source.send(GmiiFrame.from_payload(bytes(frame)))

    async def receive(self, timeout_us: float = 200) -> Ether:
        """The next frame from the board that is neither an ARP request nor a host-link
        datagram."""
        return await with_timeout(self.frames.get(), timeout_us, "us")

    async def _collect(self) -> None:
        while True:
            frame = await self.sink.recv()
            assert frame.check_fcs(), "frame check sequence"
            packet = Ether(bytes(frame.get_payload()))
            self.record(packet, get_time_from_sim_steps(frame.sim_time_end, "ns"))
            if ARP in packet and packet[ARP].op == 1:
                self.asked.append((get_sim_time("ns"), packet[ARP].pdst))
            await self.arrived(packet)

    async def arrived(self, packet: Ether) -> None:
        """A frame from the board: ARP requests for the host answered, host-link datagrams
        to ``replies``, the rest to ``frames``."""
        if ARP in packet and packet[ARP].op == 1 and packet[ARP].pdst == HOST_IP:
            await self.answer_arp(packet)
        elif UDP in packet and packet[UDP].sport == F.LINK_PORT:
            await self.replies.put(packet)
        else:
            await self.frames.put(packet)

    async def answer_arp(self, request: Ether) -> None:
        """The host's MAC address for the address asked for."""
        await self.send(Ether(dst=request.src, src=HOST_MAC) / ARP(
            op=2, hwsrc=HOST_MAC, psrc=request[ARP].pdst, hwdst=request.src, pdst=request[ARP].psrc))


class LinkPort:
    """A host on the host link: driver/link.py's LinkClient, its datagrams in frames on the
    wire; each way a fraction ``loss`` of them is lost, ``duplicate`` sent twice and
    ``reorder`` held back behind the next. Registers by REGISTERS requests; pushed events
    and control packets are kept for the caller."""

    def __init__(self, wire: GmiiWire, *, loss: float = 0.0, duplicate: float = 0.0, reorder: float = 0.0,
                 seed: int = 1, port: int = HOST_LINK_PORT) -> None:
        self.wire, self.loss, self.duplicate, self.reorder, self.port = wire, loss, duplicate, reorder, port
        self.random = random.Random(seed)
        self.held: dict[str, list] = {"out": [], "in": []}
        self.client = LinkClient(retry=100e-6, give_up=0.05)
        self.pushed_events: list[int] = []
        self.packets: list[F.ControlPacket] = []
        self.answered_at = self.pushed_at = 0.0
        """When the last reply's frame, and the last event push's, ended on the wire, in ns."""

    def frame(self, payload: bytes) -> Ether:
        return (Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(src=HOST_IP, dst=IP_ADDRESS)
                / UDP(sport=self.port, dport=F.LINK_PORT) / payload)

    async def until(self, done, limit_us: float = 20_000) -> None:
        """Run the client (at least one round) until ``done()``, sending its datagrams and
        taking the board's."""
        if not self.client.opened and self.client.opening is None:
            self.client.open()
        end = get_sim_time("us") + limit_us
        while True:
            assert get_sim_time("us") < end, "the host link made no progress"
            now = get_sim_time("ns") / 1e9
            for datagram in self.impair("out", self.client.outgoing(now)):
                await self.wire.send(self.frame(datagram))
            replies = []
            while not self.wire.replies.empty():
                reply = self.wire.replies.get_nowait()
                assert ip_checksum_holds(reply) and (reply[IP].src, reply[IP].dst) == (IP_ADDRESS, HOST_IP)
                if reply[UDP].dport == self.port:
                    replies.append(reply)
            for reply in self.impair("in", replies):
                datagram = udp_payload(reply)
                if F.decode(datagram)[0].type == F.Type.EVENTS:
                    self.pushed_at = float(reply.time) * 1e9
                else:
                    self.answered_at = float(reply.time) * 1e9
                self.client.receive(datagram, now)
            pushed = self.client.take_pushed()
            self.pushed_events += pushed.events
            self.packets += pushed.packets
            self.client.timeout(now)
            await ClockCycles(self.wire.dut.clk, 20)
            if done():
                return

    def impair(self, way: str, items: list) -> list:
        """What of ``items`` goes through this round, in order: some lost, some twice, some
        held back until the next item that goes ahead of them."""
        out = []
        for item in items:
            if self.random.random() < self.loss:
                continue
            copies = [item] * (2 if self.random.random() < self.duplicate else 1)
            if self.random.random() < self.reorder:
                self.held[way] += copies
                continue
            out += copies + self.held[way]
            self.held[way] = []
        return out

    async def open(self) -> None:
        await self.until(lambda: self.client.opened)

    async def transact(self, operations: list[F.Operation]) -> list[int]:
        await self.open()
        request = self.client.submit(F.Type.REGISTERS, F.encode_operations(operations))
        await self.until(lambda: request.reply is not None)
        return [op.value for op in F.decode_operations(request.reply[1])]

    async def write(self, address: int, value: int) -> None:
        await self.transact([F.Operation(F.Opcode.WRITE, address, value)])

    async def read(self, address: int) -> int:
        return (await self.transact([F.Operation(F.Opcode.READ, address)]))[0]

    async def events(self) -> list[int]:
        """The EVENT words pushed so far, taken."""
        await self.until(lambda: True)
        out, self.pushed_events = self.pushed_events, []
        return out

    async def many(self, requests: F.Requests) -> list[tuple[F.Header, bytes]]:
        """Requests pipelined through the window; their replies in order."""
        await self.open()
        submitted = [self.client.submit(kind, body, value) for kind, body, value in requests]
        await self.until(lambda: all(r.reply is not None for r in submitted), limit_us=200_000)
        return [r.reply for r in submitted]

    async def upload(self, word_address: int, data: bytes, mtu: int = 1500) -> None:
        await self.many(F.upload_requests(word_address, data, mtu))


def udp_payload(packet: Ether) -> bytes:
    """The datagram's payload by its UDP length (a short frame's Ethernet padding is not)."""
    return bytes(packet[UDP])[8:packet[UDP].len]


def ip_checksum_holds(packet: Ether) -> bool:
    header = bytes(packet[IP])[:packet[IP].ihl * 4]
    return checksum(header) == 0
