"""cocotb side of the Ethernet benchmark (sim/ethernet_bench.py runs it; results as JSON).

The integrated top (hw/node.py) on GMII at 125 MHz, its registers reached by management
datagrams. Times are simulation times of frames on the GMII wires, exact and
independent of the host machine.
"""

from __future__ import annotations

import ipaddress
import os
import statistics

import cocotb
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.eth import GmiiFrame
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netblt.driver import management as M
from netblt.gateware.control import FLAG_UDP
from netblt.gateware.pattern import pattern_bytes
from netblt.gateware.registers import ADDRESS, COMMAND_WORD, Command, Event
from netblt.host import codec, packets
from netblt.host import layout as L
from netblt.hw.liteeth_core import IP_ADDRESS, MAC_ADDRESS
from netblt.sim.ethernet_wire import HOST_IP, HOST_MAC, ManagementPort, Wire
from netblt.sim.register_host import RegisterHost
from netblt.sim.testbench import CONFIG, record
from netblt.sim.wire import UDP_HEADER, wire_bytes

CASES = [(int(size), udp == "udp") for size, udp in
         (case.split(":") for case in os.environ.get("NETBLT_BENCH_CASES", "1456:ip,1448:udp").split(","))]
"""NETBLT data bytes per packet and the carriage (native IP or UDP)."""
LOCAL_PORT, PEER_PORT, UDP_PORT = 2998, 40001, 2999


async def connect(dut, wire: Wire, size: int, udp: bool) -> RegisterHost:
    host = RegisterHost(dut, ManagementPort(wire))
    await host.configure(PACKET_SIZE=size, LOCAL_PORT=LOCAL_PORT, PEER_PORT=PEER_PORT,
                         PEER_ADDRESS=int(ipaddress.IPv4Address(HOST_IP)), UDP_LOCAL_PORT=UDP_PORT,
                         UDP_PEER_PORT=UDP_PORT, FLAGS=udp << FLAG_UDP, PACING_MODE=0)
    return host


def buffer_packets(size: int) -> int:
    return min(CONFIG.slot_bytes // size, CONFIG.max_packets)


@cocotb.test()
async def bench_transmit(dut):
    """Unpaced: a SEND of every transmit slot in one management request, then the
    frames timed at the wire. (A SEND replaces what its slot was sending, so each slot
    goes once: timing in simulation is exact, and a few dozen frames measure it.)"""
    wire = await Wire.create(dut, "bench_transmit")
    rows = []
    for size, udp in CASES:
        host = await connect(dut, wire, size, udp)
        per_buffer = buffer_packets(size)
        length = per_buffer * size
        for slot in range(CONFIG.tx_slots):
            await host.command(Command.FILL, slot, slot, length)
        for _ in range(CONFIG.tx_slots):
            await host.wait_for(Event.FILLED)
        operations = []
        for slot in range(CONFIG.tx_slots):
            operations += [M.Operation(M.Opcode.WRITE, ADDRESS["ARG0"], slot),
                           M.Operation(M.Opcode.WRITE, ADDRESS["ARG1"], length),
                           M.Operation(M.Opcode.WRITE, ADDRESS["COMMAND"], COMMAND_WORD.pack(op=Command.SEND, slot=slot))]
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
    wire = await Wire.create(dut, "bench_receive")
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
        for frame in frames:
            await wire.source.send(GmiiFrame.from_payload(frame))
        await with_timeout(wire.source.wait(), 100, "ms")
        await ClockCycles(dut.clk, 2000)
        accepted = await host.read("RX_ACCEPTED")
        drops = {name: value for name in ADDRESS if name.startswith("DROPPED_")
                 if (value := await host.read(name))}
        rows.append({"payload": size, "udp": udp, "frames": len(frames), "gap_bytes": wire.source.ifg,
                     "accepted": accepted, "drops": drops})
    record("receive", rows)
