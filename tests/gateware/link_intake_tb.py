"""cocotb tests of the host link's intake (gateware/link_intake.py) on its own."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw

from netblt.formats import host_link as F
from netblt.gateware.packet_fifo import CONTROL_META
from netblt.formats.rfc998 import UDP_PROTOCOL
from netblt.gateware.streams import ip_payload
from netblt.formats import rfc998 as L
from netblt.sim.rtl.beats import BeatSink, BeatSource, beat_bytes, to_beats
from netblt.sim.rtl.testbench import start

BOARD, HOST = "192.168.1.50", "192.168.1.2"
BOARD_INT, HOST_INT = 0xC0A80132, 0xC0A80102
HOST_PORT = 40990
DEPTH = 512
"""Words in the intake's FIFO (the builder in test_gateware_link_intake.py uses the same)."""


def datagram(payload: bytes, dport: int = F.LINK_PORT, sport: int = HOST_PORT) -> bytes:
    """A UDP datagram with its checksum, as scapy (not the code under test) computes it."""
    return bytes(IP(src=HOST, dst=BOARD) / UDP(sport=sport, dport=dport) / Raw(payload))[20:]


def beats(raw: bytes, protocol: int = UDP_PROTOCOL, **changes) -> list[dict]:
    out = to_beats(raw, 4, address=HOST_INT, protocol=protocol, length=len(raw))
    for key, value in changes.items():
        out[-1][key] = value
    return out


class Intake:
    def __init__(self, dut, *, idle: float = 0.0, stall: float = 0.0, seed: int = 1) -> None:
        rng = random.Random(seed)
        self.dut = dut
        self.net = BeatSource(dut, "net_rx", ip_payload(32), idle=idle, rng=rng)
        self.engine = BeatSink(dut, "engine_rx", ip_payload(32), stall=stall, rng=rng)
        self.payload = BeatSink(dut, "payload", None, stall=stall, rng=rng)
        self.meta = BeatSink(dut, "meta", CONTROL_META, stall=stall, rng=rng)
        self.dropped = 0

    @classmethod
    async def create(cls, dut, **kw) -> Intake:
        await start(dut)
        intake = cls(dut, **kw)
        for sink in (intake.engine, intake.payload, intake.meta):
            cocotb.start_soon(sink.run())
        cocotb.start_soon(intake.count())
        return intake

    async def count(self) -> None:
        while True:
            await ReadOnly()
            self.dropped += bin(int(self.dut.dropped.value)).count("1")
            await RisingEdge(self.dut.clk)

    def queued(self) -> list[tuple[dict, bytes]]:
        """The datagrams the FIFO gave out: meta, and payload bytes cut by it."""
        words = b"".join(w.to_bytes(4, "little") for _, w in self.payload.beats)
        out, at = [], 0
        for _, meta in self.meta.beats:
            out.append((meta, words[at:at + meta["length"]]))
            at += meta["length"]
        assert at == len(words), "payload words that no meta accounts for"
        return out


async def run_mix(dut, **kw) -> None:
    intake = await Intake.create(dut, **kw)
    rng = random.Random(kw.get("seed", 1))
    engine_packets, link_payloads = [], []
    stream = []
    for i in range(40):
        choice = rng.random()
        if choice < 0.4:
            body = F.encode(F.Header(F.Type.REGISTERS, id=i), bytes(rng.randrange(256) for _ in range(8 * rng.randrange(0, 20))))
            link_payloads.append(body)
            stream += beats(datagram(body))
        elif choice < 0.7:
            raw = bytes(rng.randrange(256) for _ in range(rng.randrange(24, 300)))
            engine_packets.append((L.IP_PROTOCOL, raw))
            stream += beats(raw, protocol=L.IP_PROTOCOL)
        else:  # NETBLT in UDP, to another port: the engine's
            raw = datagram(bytes(rng.randrange(256) for _ in range(rng.randrange(16, 200))), dport=2998)
            engine_packets.append((UDP_PROTOCOL, raw))
            stream += beats(raw)
    await intake.net.send(stream)
    await ClockCycles(dut.clk, 200)
    got = [(beats_[0]["protocol"], beat_bytes(beats_, 4)) for _, beats_ in intake.engine.packets()]
    assert got == engine_packets
    queued = intake.queued()
    assert [payload for _, payload in queued] == link_payloads
    assert all((m["address"], m["port"]) == (HOST_INT, HOST_PORT) for m, _ in queued)
    assert intake.dropped == 0


@cocotb.test()
async def test_link_datagrams_are_queued_whole_and_the_rest_passes(dut):
    await run_mix(dut)


@cocotb.test()
async def test_the_same_with_idle_gaps_and_backpressure(dut):
    await run_mix(dut, idle=0.3, stall=0.3, seed=5)


@cocotb.test()
async def test_bad_datagrams_are_dropped_and_counted_and_nothing_of_them_is_queued(dut):
    intake = await Intake.create(dut)
    good = F.encode(F.Header(F.Type.STATUS))
    raw = datagram(good)
    damaged = bytearray(raw)
    damaged[-1] ^= 0x40
    bad = [
        beats(raw[:6] + b"\0\0" + raw[8:]),                         # no checksum
        beats(bytes(damaged)),                                      # checksum fails
        beats(raw[:4] + (len(raw) + 4).to_bytes(2, "big") + raw[6:]),  # UDP length is not the IP length
        beats(raw, error=1),                                        # the link layer saw a bad frame
        beats(datagram(good[:12])),                                 # shorter than a link header
        beats(datagram(good + b"xyz")),                             # not whole words
        beats(datagram(bytes(4 * (DEPTH + 8)))),                    # does not fit the FIFO
    ]
    for packet in bad:
        await intake.net.send(packet)
    await intake.net.send(beats(raw))
    # A short frame's Ethernet padding trimmed to a last beat that keeps nothing.
    padded = beats(raw) + [dict(beats(raw)[-1], data=0, keep=0)]
    padded[-2]["last"] = 0
    await intake.net.send(padded)
    await ClockCycles(dut.clk, 100)
    assert intake.dropped == len(bad)
    assert [payload for _, payload in intake.queued()] == [good, good]
    assert intake.engine.beats == []
