"""cocotb tests of the host link's sender (gateware/link_sender.py) with a store behind it."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from scapy.layers.inet import IP, UDP
from scapy.utils import checksum

from netblt.formats import host_link as F
from netblt.gateware.link_sender import SEND_COMMAND
from netblt.gateware.streams import ip_payload
from netblt.sim.rtl.beats import BeatSink, BeatSource, beat_bytes
from netblt.sim.rtl.testbench import start

from link_intake_tb import BOARD, HOST, HOST_INT, HOST_PORT


def sum_of(words: bytes) -> int:
    """The sum the executor hands over: the payload's 16-bit big-endian halves added."""
    return sum(int.from_bytes(words[i:i + 2], "big") for i in range(0, len(words), 2))


async def write_store(dut, start_word: int, payload: bytes) -> None:
    for i in range(0, len(payload), 4):
        dut.write__addr.value = start_word + i // 4
        dut.write__data.value = int.from_bytes(payload[i:i + 4], "little")  # wire order in the lanes
        dut.write__en.value = 1
        await RisingEdge(dut.clk)
    dut.write__en.value = 0


def udp_checks(raw: bytes) -> bool:
    """The datagram's checksum holds over scapy's pseudo-header (0: none sent)."""
    if raw[6:8] == b"\0\0":
        return True
    pseudo = bytes(IP(src=BOARD, dst=HOST, proto=17, len=20 + len(raw)))[12:20] + b"\0\x11" + len(raw).to_bytes(2, "big")
    return checksum(pseudo + raw) == 0


async def run(dut, *, idle: float, stall: float, seed: int) -> None:
    await start(dut)
    rng = random.Random(seed)
    dut.write__en.value = 0
    commands = BeatSource(dut, "command", SEND_COMMAND)
    body = BeatSource(dut, "body", None, idle=idle, rng=rng)
    out = BeatSink(dut, "out", ip_payload(32), stall=stall, rng=rng)
    cocotb.start_soon(out.run())
    expected = []
    for n in range(12):
        payload = bytes(rng.randrange(256) for _ in range(4 * rng.randrange(4, 120)))
        start_word = 128 * (n % 8)
        await write_store(dut, start_word, payload[:16] if n % 3 == 0 else payload)
        streamed = n % 3 == 0
        await commands.send([{"start": start_word, "stored": 4 if streamed else len(payload) // 4,
                              "words": len(payload) // 4, "sum": 0 if streamed else sum_of(payload),
                              "address": HOST_INT, "port": HOST_PORT}])
        if streamed:
            await body.send(int.from_bytes(payload[i:i + 4], "little") for i in range(16, len(payload), 4))
        expected.append((payload, streamed))
        await ClockCycles(dut.clk, len(payload) // 2 + 20)
    got = out.packets()
    assert len(got) == len(expected)
    for (_, beats), (payload, streamed) in zip(got, expected):
        raw = beat_bytes(beats, 4)
        assert all((b["address"], b["protocol"], b["length"]) == (HOST_INT, 17, len(raw)) for b in beats)
        udp = UDP(raw)
        assert (udp.sport, udp.dport, udp.len) == (F.LINK_PORT, HOST_PORT, len(raw))
        assert raw[8:] == payload
        assert (raw[6:8] == b"\0\0") == streamed and udp_checks(raw)


@cocotb.test()
async def test_stored_and_streamed_datagrams_leave_with_their_headers(dut):
    await run(dut, idle=0.0, stall=0.0, seed=1)


@cocotb.test()
async def test_the_same_with_gaps_in_the_body_and_backpressure(dut):
    await run(dut, idle=0.3, stall=0.4, seed=2)
