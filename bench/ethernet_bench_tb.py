"""cocotb side of the Ethernet benchmark (bench/ethernet_bench.py runs it; results as JSON).

The integrated top (hw/node.py) on GMII at 125 MHz, reached over the host link. Times
are simulation times of frames on the GMII wires, exact and independent of the host
machine.
"""

from __future__ import annotations

import ipaddress
import os
import statistics

import cocotb
from cocotb.triggers import ClockCycles, with_timeout
from cocotb.utils import get_sim_time
from cocotbext.eth import GmiiFrame
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from ..formats import host_link as F, rfc998 as L
from ..formats.registers import ADDRESS, COMMAND_WORD, CONNECTION_FLAGS, DROP_COUNTERS, Command, Event
from ..formats.pattern import pattern_bytes
from ..formats.boards import IP_ADDRESS, MAC_ADDRESS
from ..protocol import codec, packets
from ..sim.rtl.ethernet_wire import HOST_IP, HOST_MAC, LinkPort, GmiiWire
from ..sim.rtl.register_host import RegisterHost
from ..sim.rtl.testbench import CONFIG, record
from .wire import UDP_HEADER, wire_bytes

CASES = [(int(size), udp == "udp") for size, udp in
         (case.split(":") for case in os.environ.get("NETBLT_BENCH_CASES", "1456:ip,1448:udp").split(","))]
"""NETBLT data bytes per packet and the carriage (native IP or UDP)."""
LOCAL_PORT, PEER_PORT, UDP_PORT = 2998, 40001, 2999


async def connect(dut, wire: GmiiWire, size: int, udp: bool) -> RegisterHost:
    host = RegisterHost(dut, LinkPort(wire))
    await host.configure(PACKET_SIZE=size, LOCAL_PORT=LOCAL_PORT, PEER_PORT=PEER_PORT,
                         PEER_ADDRESS=int(ipaddress.IPv4Address(HOST_IP)), UDP_LOCAL_PORT=UDP_PORT,
                         UDP_PEER_PORT=UDP_PORT, FLAGS=CONNECTION_FLAGS.pack(udp=int(udp)), PACING_MODE=0)
    return host


PACKETS = int(os.environ.get("NETBLT_BENCH_PACKETS") or 0)
"""At most this many packets a buffer (0: what a slot holds): a board's DRAM slots hold
thousands, and a few dozen a slot measure the wire's timing as well."""


def buffer_packets(size: int) -> int:
    most = min(CONFIG.slot_bytes // size, CONFIG.max_packets)
    return min(most, PACKETS) if PACKETS else most


def link_theoretical_mbps(mtu: int) -> float:
    """The most the wire carries of a host link's data at this MTU."""
    step = 4 * F.max_words(mtu)
    return step / wire_bytes(UDP_HEADER + F.HEADER.end + step) * 1e3


async def timed_upload(port: LinkPort, first_word: int, data: bytes, mtu: int = 1500) -> tuple[float, float]:
    """When the upload's requests began and when its last reply ended on the wire (ns)."""
    started = get_sim_time("ns")
    await port.upload(first_word, data, mtu)
    return started, port.answered_at


async def upload_slots(port: LinkPort, length: int) -> None:
    """Each transmit slot's first ``length`` bytes, a pattern, over the host link (the
    Colorlight's build has no FILL)."""
    for slot in range(CONFIG.tx_slots):
        await port.upload(slot * CONFIG.slot_bytes // 4, pattern_bytes(slot, length))


@cocotb.test()
async def bench_transmit(dut):
    """Unpaced: every transmit slot uploaded, a SEND of each in one host-link request, then the
    frames timed at the wire. (A SEND replaces what its slot was sending, so each slot
    goes once: timing in simulation is exact, and a few dozen frames measure it.)"""
    wire = await GmiiWire.create(dut, "bench_transmit")
    rows = []
    for size, udp in CASES:
        host = await connect(dut, wire, size, udp)
        per_buffer = buffer_packets(size)
        length = per_buffer * size
        await upload_slots(host.port, length)
        operations = []
        for slot in range(CONFIG.tx_slots):
            operations += [F.Operation(F.Opcode.WRITE, ADDRESS["ARG0"], slot),
                           F.Operation(F.Opcode.WRITE, ADDRESS["ARG1"], length),
                           F.Operation(F.Opcode.WRITE, ADDRESS["COMMAND"], COMMAND_WORD.pack(op=Command.SEND, slot=slot))]
        await host.port.transact(operations)
        reply_at = host.port.answered_at
        ends = []
        for _ in range(CONFIG.tx_slots * per_buffer):
            frame = await wire.receive(timeout_us=2000)
            assert len(codec.decode(bytes(frame[UDP].payload if udp else frame[IP].payload)).packet.payload) == size
            ends.append(frame.time * 1e9)
        timed = [t for t in ends if t > reply_at][1:]
        on_wire = wire_bytes((UDP_HEADER if udp else 0) + L.DATA_HEADER_SIZE + size)
        rows.append({"payload": size, "udp": udp, "frames": len(timed), "wire_bytes": on_wire,
                     "median_interval_ns": statistics.median(b - a for a, b in zip(timed, timed[1:])),
                     "goodput_mbps": size * 8 * (len(timed) - 1) / (timed[-1] - timed[0]) * 1e3,
                     "theoretical_mbps": size * 8 / (on_wire * 8) * 1e3})
    record("transmit", rows)


@cocotb.test()
async def bench_receive(dut):
    """DATA frames back to back at the minimum gap into posted slots; every one counted."""
    wire = await GmiiWire.create(dut, "bench_receive")
    rows = []
    for size, udp in CASES:
        host = await connect(dut, wire, size, udp)
        await host.write("COUNTERS_CLEAR", 1)
        per_buffer = buffer_packets(size)
        frames = []
        for slot in range(CONFIG.rx_slots):
            buffer = 100 + slot
            await host.command(Command.POST, slot, buffer)
            body = pattern_bytes(buffer, per_buffer * size)
            for number in range(per_buffer):
                netblt = codec.encode(packets.Data(buffer, number, 0, body[number * size:(number + 1) * size],
                                                   number == per_buffer - 1), PEER_PORT, LOCAL_PORT)
                carried = UDP(sport=UDP_PORT, dport=UDP_PORT, chksum=0) / netblt if udp else netblt
                frames.append(bytes(Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(
                    src=HOST_IP, dst=IP_ADDRESS, proto=17 if udp else 30) / carried))
        started = get_sim_time("ns")
        for frame in frames:
            await wire.source.send(GmiiFrame.from_payload(frame))
        await with_timeout(wire.source.wait(), 100, "ms")
        sent_ns = get_sim_time("ns") - started
        await ClockCycles(dut.clk, 2000)
        accepted = await host.read("RX_ACCEPTED")
        drops = {name: value for name in DROP_COUNTERS if (value := await host.read(name))}
        rows.append({"payload": size, "udp": udp, "frames": len(frames), "gap_bytes": wire.source.ifg,
                     "frame_bytes": len(frames[0]) + 4, "sent_ns": sent_ns, "accepted": accepted, "drops": drops})
    record("receive", rows)


def link_goodput(data_bytes: int, started_ns: float, ended_ns: float) -> float:
    return data_bytes * 8 / (ended_ns - started_ns) * 1e3


@cocotb.test()
async def bench_link(dut):
    """Host-link bulk data at each MTU in NETBLT_BENCH_MTUS: every transmit slot uploaded
    and every receive slot downloaded, requests pipelined through the client's window,
    timed from the first request to the last reply's end on the wire; at 1500 bytes an
    upload while the engine sends a slot unpaced; and how soon an event reaches the host
    as a push."""
    wire = await GmiiWire.create(dut, "bench_link")
    host = await connect(dut, wire, 1456, False)
    port = host.port
    # Four jumbo requests take 290 us on the wire: the tests' 100 us retry would send
    # STATUS and RESEND while the replies are still on their way.
    port.client.timer.least = 1e-3
    slots = CONFIG.slot_bytes
    data = pattern_bytes(3, CONFIG.tx_slots * slots)
    rows = []
    for mtu in (int(m) for m in os.environ.get("NETBLT_BENCH_MTUS", "1500").split(",")):
        theoretical = link_theoretical_mbps(mtu)
        started, ended = await timed_upload(port, 0, data, mtu)
        rows.append({"case": f"upload, every transmit slot, {mtu}-byte MTU", "bytes": len(data),
                     "goodput_mbps": link_goodput(len(data), started, ended), "theoretical_mbps": theoretical})
        words = CONFIG.rx_slots * slots // 4
        started = get_sim_time("ns")
        replies = await port.many(F.download_requests(0, 4 * words, mtu))
        ended = port.answered_at
        assert sum(len(body) for _, body in replies) == 4 * words
        rows.append({"case": f"download, every receive slot, {mtu}-byte MTU", "bytes": 4 * words,
                     "goodput_mbps": link_goodput(4 * words, started, ended), "theoretical_mbps": theoretical})
    # Slot 0 leaves unpaced while slot 1 is uploaded again.
    await host.command(Command.SEND, 0, 1, slots)
    started, ended = await timed_upload(port, slots // 4, data[slots:])
    data_ends = []
    while True:
        frame = await wire.receive(timeout_us=2000)
        data_ends.append(frame.time * 1e9)
        if len(data_ends) == slots // 1456:
            break
    rows.append({"case": "upload while the engine sends", "bytes": slots,
                 "goodput_mbps": link_goodput(slots, started, ended),
                 "theoretical_mbps": link_theoretical_mbps(1500),
                 "data_mbps": link_goodput(1456 * (len(data_ends) - 1), data_ends[0], data_ends[-1])})
    # Event latency: SENT's push after the buffer's last DATA frame left.
    await host.wait_for(Event.SENT)
    pushed_at = port.pushed_at
    rows.append({"case": "event push after the last DATA frame", "latency_ns": pushed_at - data_ends[-1],
                 "latency_cycles": round((pushed_at - data_ends[-1]) * CONFIG.clock_hz / 1e9)})
    record("link", rows)


@cocotb.test()
async def bench_arp(dut):
    """DATA sent unpaced, one slot after the other, for four of LiteEth's ARP cache-clear
    periods (run NETBLT_BENCH_ARP_TIMESCALE times faster than the real second): how
    often the board asks ARP again and how long its DATA waits each time; then a buffer
    after two quiet periods, which should find the cache cleared."""
    wire = await GmiiWire.create(dut, "bench_arp")
    host = await connect(dut, wire, 1456, False)
    length = CONFIG.slot_bytes // 1456 * 1456
    await upload_slots(host.port, length)
    clear_ns = 1e9 / float(os.environ["NETBLT_BENCH_ARP_TIMESCALE"])
    started = get_sim_time("ns")
    wire.asked = []
    ends = []
    sends = 0
    while get_sim_time("ns") - started < 4 * clear_ns:
        await host.command(Command.SEND, sends % CONFIG.tx_slots, sends, length)
        sends += 1
        for _ in range(length // 1456):
            frame = await wire.receive(timeout_us=5000)
            ends.append(frame.time * 1e9)
        await host.wait_for(Event.SENT)
    gaps = list(zip(ends, ends[1:]))
    usual = statistics.median(b - a for a, b in gaps)
    # A gap with an ARP request in it waited for ARP; the others between buffers, for the
    # host's next SEND.
    arp_gaps = [b - a for a, b in gaps if any(a < t < b for t, _ in wire.asked)]
    during = len(wire.asked)
    # Then quiet for two clear periods, and one more buffer: the cache was cleared.
    await ClockCycles(dut.clk, int(2 * clear_ns * CONFIG.clock_hz / 1e9))
    wire.asked = []
    await host.command(Command.SEND, 0, sends, length)
    for _ in range(length // 1456):
        await wire.receive(timeout_us=5000)
    record("arp", {"clear_ns": clear_ns, "sim_ns": ends[-1] - ends[0], "frames": len(ends), "buffers": sends,
                   "arp_requests": during, "median_gap_ns": usual, "arp_gaps_ns": arp_gaps,
                   "arp_requests_after_quiet": len(wire.asked)})
