"""The sink port in Amaranth's simulator: a DRAIN offers a receive slot's bytes on the
sink stream in order, each word with its buffer, the valid bytes of the last one and
``last``; a sink that holds ``ready`` low holds the drain and loses nothing; the pattern
checker counts the words taken that are not the buffer's pattern; DRAINED follows the last
word. The store's reader is the testbench's: a seek, then words when it likes."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from netblt.formats.pattern import pattern_bytes
from netblt.gateware.config import EngineConfig
from netblt.gateware.sink_port import PatternChecker, SinkDrain
from netblt.hw.example_sink import PacedSink

CONFIG = EngineConfig(slot_bytes=1024, max_packets=32, fifo_depth=16)
W = CONFIG.beat_bytes


class Drain(wiring.Component):
    """The drainer with the checker watching its sink, as the receiver wires them."""

    def __init__(self) -> None:
        self.drainer = SinkDrain(CONFIG)
        super().__init__(dict(self.drainer.signature.members) | {"mismatches": wiring.Out(32)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.drainer = drainer = self.drainer
        m.submodules.checker = checker = PatternChecker(CONFIG)
        for name in ("command", "seek", "words", "sink"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(drainer, name))
        m.d.comb += [self.busy.eq(drainer.busy), self.done.eq(drainer.done),
                     checker.start.eq(self.command.valid & self.command.ready),
                     checker.buffer.eq(self.command.payload.buffer), checker.word.eq(self.sink.payload),
                     checker.taken.eq(self.sink.valid & self.sink.ready), self.mismatches.eq(checker.mismatches)]
        return m


def drain(memory: bytes, slot: int, buffer: int, length: int, stall: float, seed: int = 1) -> dict:
    """DRAIN ``slot`` of ``memory`` (the receive store's bytes) through a reader and a sink
    that each hold back a cycle with chance ``stall``; every cycle, the testbench sets the
    reader's offer and the sink's ready, then sees what the edge will take."""
    dut = Drain()
    rng = random.Random(seed)
    result: dict = {"words": [], "seeks": []}

    async def bench(ctx):
        p = dut.command.payload
        for name, value in (("slot", slot), ("buffer", buffer), ("length", length)):
            ctx.set(getattr(p, name), value)
        ctx.set(dut.command.valid, 1)
        ctx.set(dut.seek.ready, 1)
        await ctx.tick()
        ctx.set(dut.command.valid, 0)
        at = None
        for cycle in range(5000):
            if ctx.get(dut.done):
                result["done_at"], result["mismatches"] = cycle, ctx.get(dut.mismatches)
                return
            ctx.set(dut.sink.ready, rng.random() >= stall)
            offer = at is not None and rng.random() >= stall
            ctx.set(dut.words.valid, offer)
            if offer:
                ctx.set(dut.words.payload, int.from_bytes(memory[at * W:(at + 1) * W], "little"))
            sought = ctx.get(dut.seek.payload) if ctx.get(dut.seek.valid) else None
            read = offer and ctx.get(dut.words.ready)
            if ctx.get(dut.sink.valid) and ctx.get(dut.sink.ready):
                word = dut.sink.payload
                result["words"].append({k: ctx.get(getattr(word, k)) for k in ("data", "keep", "last", "buffer")})
            await ctx.tick()
            if sought is not None:
                result["seeks"].append(sought)
                at = sought
            elif read:
                at += 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result


def taken_bytes(words: list[dict]) -> bytes:
    return b"".join(bytes(b for i, b in enumerate(w["data"].to_bytes(W, "little")) if w["keep"] >> i & 1)
                    for w in words)


def slots(*contents: bytes) -> bytes:
    return b"".join(c.ljust(CONFIG.slot_bytes, b"\0") for c in contents)


@pytest.mark.parametrize("stall", [0.0, 0.5])
@pytest.mark.parametrize("length", [4 * W, 1000, 1])
def test_a_drain_offers_the_slot_in_order_however_the_sink_and_the_store_hold_back(stall, length):
    memory = slots(bytes(range(256)) * 4, pattern_bytes(9, CONFIG.slot_bytes))
    result = drain(memory, 1, 9, length, stall)
    words = result["words"]
    assert result["seeks"] == [CONFIG.slot_words]
    assert taken_bytes(words) == pattern_bytes(9, length)
    assert [w["last"] for w in words] == [0] * (len(words) - 1) + [1]
    assert {w["buffer"] for w in words} == {9}
    assert result["mismatches"] == 0 and "done_at" in result  # DRAINED, once the last word is taken


def test_a_drain_longer_than_a_slot_offers_nothing_and_ends():
    """ARG1 past the slot's end (a host's mistake or a hostile one) reads no other slot."""
    result = drain(slots(bytes(1024), pattern_bytes(9, CONFIG.slot_bytes)), 0, 9, CONFIG.slot_bytes + W, 0.0)
    assert result["words"] == [] and "done_at" in result


def test_the_checker_counts_the_words_that_are_not_the_pattern():
    """One byte wrong counts its word; the wrong buffer's pattern counts every word; a
    drain starts the count over."""
    data = bytearray(pattern_bytes(5, 1000))
    data[333] ^= 0x40
    memory = slots(bytes(data))
    assert drain(memory, 0, 5, 1000, 0.3)["mismatches"] == 1
    assert drain(memory, 0, 6, 1000, 0.3)["mismatches"] == -(-1000 // W)
    assert drain(memory, 0, 5, 333, 0.3)["mismatches"] == 0  # the wrong byte is past the drain's end


def test_the_example_sink_takes_a_word_every_so_many_cycles():
    """hw/example_sink.py's paced sink (a DAC's pace) holds a drain back, never loses a word."""
    dut = PacedSink(every=3)
    seen = []

    async def bench(ctx):
        ctx.set(dut.sink.valid, 1)
        for _ in range(30):
            seen.append(ctx.get(dut.sink.ready))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    ready_at = [cycle for cycle, ready in enumerate(seen) if ready]
    assert len(ready_at) == 10 and {b - a for a, b in zip(ready_at, ready_at[1:])} == {3}
