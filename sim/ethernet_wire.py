"""The testbench's end of an Ethernet link to the integrated top (hw/node.py on GMII).

cocotbext-eth's GMII models carry the frames; scapy builds and reads them as an
independent stack would, every frame goes to a pcap for Wireshark, ARP requests for the
host are answered, and ``ManagementPort`` reaches the registers in management datagrams.
"""

from __future__ import annotations

import cocotb
from cocotb.clock import Clock
from cocotb.queue import Queue
from cocotb.triggers import ClockCycles, with_timeout
from cocotb.utils import get_sim_time, get_time_from_sim_steps
from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import PcapWriter, checksum

from netblt.driver import management as M
from netblt.hw.liteeth_core import IP_ADDRESS, MAC_ADDRESS
from netblt.sim import hdl
from netblt.sim.testbench import start

HOST_MAC = "02:00:00:00:00:02"
HOST_IP = "192.168.1.2"
HOST_MANAGEMENT_PORT = 40990


class Wire:
    """The testbench's end of the GMII link: frames each way, in a pcap, and ARP
    requests for the host's address answered as a host's stack would."""

    def __init__(self, dut, test: str) -> None:
        Clock(dut.gmii__rx_clk, 8, unit="ns").start()
        Clock(dut.gmii__tx_clk, 8, unit="ns").start()
        self.source = GmiiSource(dut.gmii__rx_data, dut.gmii__rx_er, dut.gmii__rx_dv,
                                 dut.gmii__rx_clk, dut.gmii__reset)
        self.sink = GmiiSink(dut.gmii__tx_data, dut.gmii__tx_er, dut.gmii__tx_en,
                             dut.gmii__tx_clk, dut.gmii__reset)
        directory = hdl.BUILD / "pcap"
        directory.mkdir(parents=True, exist_ok=True)
        self.pcap = PcapWriter(str(directory / f"{test}.pcap"), linktype=1, sync=True)
        self.dut = dut
        self.frames: Queue[Ether] = Queue()
        self.replies: Queue[Ether] = Queue()
        """Management replies, apart from the engine's traffic."""
        cocotb.start_soon(self._collect())

    @classmethod
    async def create(cls, dut, test: str) -> "Wire":
        dut.gmii__reset.value = 1
        await start(dut)
        wire = cls(dut, test)
        await ClockCycles(dut.clk, 10)
        dut.gmii__reset.value = 0
        await ClockCycles(dut.clk, 10)
        return wire

    def record(self, frame: Ether, at_ns: float | None = None) -> None:
        """Into the pcap, stamped with simulation time (now, or ``at_ns``)."""
        frame.time = (get_sim_time("ns") if at_ns is None else at_ns) / 1e9
        self.pcap.write(frame)

    async def send(self, frame: Ether) -> None:
        self.record(frame)
        await self.source.send(GmiiFrame.from_payload(bytes(frame)))

    async def receive(self, timeout_us: float = 200) -> Ether:
        """The next frame from the board that is neither an ARP request nor a
        management reply."""
        return await with_timeout(self.frames.get(), timeout_us, "us")

    async def _collect(self) -> None:
        while True:
            frame = await self.sink.recv()
            assert frame.check_fcs(), "frame check sequence"
            packet = Ether(bytes(frame.get_payload()))
            self.record(packet, get_time_from_sim_steps(frame.sim_time_end, "ns"))
            if ARP in packet and packet[ARP].op == 1 and packet[ARP].pdst == HOST_IP:
                await self.send(Ether(dst=packet.src, src=HOST_MAC) / ARP(
                    op=2, hwsrc=HOST_MAC, psrc=HOST_IP, hwdst=packet.src, pdst=packet[ARP].psrc))
            elif UDP in packet and packet[UDP].sport == M.MANAGEMENT_PORT:
                await self.replies.put(packet)
            else:
                await self.frames.put(packet)


class ManagementPort:
    """Register accesses as management datagrams over the wire, one request each."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.tag = 0
        self.answered_at = 0.0
        """When the last reply's frame ended on the wire, in ns."""

    def frame(self, request: bytes) -> Ether:
        return (Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(src=HOST_IP, dst=IP_ADDRESS)
                / UDP(sport=HOST_MANAGEMENT_PORT, dport=M.MANAGEMENT_PORT) / request)

    async def transact(self, operations: list[M.Operation]) -> list[int]:
        self.tag += 1
        request = M.encode_request(self.tag, operations)
        await self.wire.send(self.frame(request))
        reply = await with_timeout(self.wire.replies.get(), 200, "us")
        assert ip_checksum_holds(reply)
        assert (reply[IP].src, reply[IP].dst) == (IP_ADDRESS, HOST_IP)
        assert reply[UDP].dport == HOST_MANAGEMENT_PORT
        self.answered_at = float(reply.time) * 1e9
        return M.decode_reply(udp_payload(reply), request)

    async def write(self, address: int, value: int) -> None:
        await self.transact([M.Operation(M.Opcode.WRITE, address, value)])

    async def read(self, address: int) -> int:
        return (await self.transact([M.Operation(M.Opcode.READ, address)]))[0]


def udp_payload(packet: Ether) -> bytes:
    """The datagram's payload by its UDP length (a short frame's Ethernet padding is not)."""
    return bytes(packet[UDP])[8:packet[UDP].len]


def ip_checksum_holds(packet: Ether) -> bool:
    header = bytes(packet[IP])[:packet[IP].ihl * 4]
    return checksum(header) == 0
