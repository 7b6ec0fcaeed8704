"""The source port in Amaranth's simulator, through the engine's registers: a TAKE
writes the words a source offers into a transmit slot, a SEND right behind it sends
them, and the counters account for every word offered (taken + refused), as a source
that cannot wait needs them to."""

from __future__ import annotations

import pytest
from engine_bus import EngineBus
from amaranth.sim import Simulator

from netblt.formats.registers import COMMAND_WORD, CONNECTION_FLAGS, EVENT_WORD, Command, Event
from netblt.gateware.config import EngineConfig
from netblt.gateware.engine import Engine
from netblt.gateware.source_port import StampSource
from netblt.hw.example_digitizer import FramedRamp

HEADER = 24
"""NETBLT's DATA header, before the data (native IP: the payload is the packet)."""
PACKET = 64
TAKE = 4 * PACKET


def run(every: int, quiet: int = 0, last_at: int | None = None, last_at_end: bool = False) -> dict:
    """A source offering 1, 2, 3 ... for one cycle each ``every`` cycles from the start,
    marking ``last`` the word ``last_at`` or (``last_at_end``) the take's final word;
    TAKE then SEND of slot 0 (TAKE bytes), the packets' data, the counters and events."""
    config = EngineConfig(slot_bytes=1024, max_packets=32, fifo_depth=16)
    dut = Engine(config)
    result = {"offered": 0, "data": bytearray()}

    async def bus(ctx):
        engine = EngineBus(ctx, dut.bus)
        write, read = engine.write, engine.read

        await write("PACKET_SIZE", PACKET)
        await write("FLAGS", CONNECTION_FLAGS.pack(udp=0))
        await ctx.tick().repeat(50)  # words offered before the TAKE are refused
        for op, arg0, flag in ((Command.TAKE, 0, quiet), (Command.SEND, 1, 1)):
            await write("ARG0", arg0)
            await write("ARG1", TAKE)
            await write("COMMAND", COMMAND_WORD.pack(op=op, slot=0, flag=flag))
        await ctx.tick().repeat(2000)
        result["stop"] = True
        await ctx.tick().repeat(4)
        for name in ("SOURCE_TAKEN", "SOURCE_REFUSED", "SOURCE_EARLY_ENDS", "COMMANDS_REJECTED"):
            result[name] = await read(name)
        kinds = []
        while word := await read("EVENT"):
            kinds.append(EVENT_WORD.unpack(word)["kind"])
        result["events"] = kinds

    async def source(ctx):
        n = taken = 0
        while "stop" not in result:
            if n % every == 0:
                value = n // every + 1
                ready = ctx.get(dut.source.ready)  # it does not wait for valid
                ctx.set(dut.source.payload.data, value)
                ctx.set(dut.source.payload.last, value == last_at or last_at_end and ready and taken == TAKE // 4 - 1)
                ctx.set(dut.source.valid, 1)
                result["offered"] += 1
                taken += ready
            await ctx.tick()
            ctx.set(dut.source.valid, 0)
            n += 1

    async def network(ctx):
        ctx.set(dut.net_tx.ready, 1)
        at = 0
        async for beat in ctx.tick().sample(dut.net_tx.valid, dut.net_tx.payload):
            *_, valid, payload = beat
            if valid:
                for lane in range(4):
                    if payload.keep >> lane & 1:
                        if at >= HEADER:
                            result["data"].append(payload.data >> 8 * lane & 0xFF)
                        at += 1
                if payload.last:
                    at = 0

    sim = Simulator(dut)
    sim.add_clock(1 / config.clock_hz)
    sim.add_testbench(bus)
    sim.add_testbench(source, background=True)
    sim.add_process(network)
    sim.run()
    return result


def words(data: bytes) -> list[int]:
    return [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]


@pytest.mark.parametrize("every", [1, 3])
def test_a_take_sends_the_words_offered_and_counts_each_one_it_could_not_take(every):
    got = run(every)
    taken = words(got["data"])
    assert len(taken) == TAKE // 4 and got["SOURCE_TAKEN"] == TAKE // 4
    first = taken[0]
    assert first > 1 and taken == list(range(first, first + TAKE // 4))  # none missed inside the take
    assert got["SOURCE_REFUSED"] == got["offered"] - TAKE // 4  # exact: every other word offered
    assert got["events"] == [Event.TAKEN, Event.SENT] and got["COMMANDS_REJECTED"] == 0


def test_a_quiet_take_raises_no_event_and_an_early_last_is_counted():
    got = run(1, quiet=1, last_at=70)
    assert got["events"] == [Event.SENT]
    assert got["SOURCE_EARLY_ENDS"] == 1


def test_a_last_that_ends_the_take_is_no_early_end():
    got = run(2, last_at_end=True)
    assert got["SOURCE_TAKEN"] == TAKE // 4 and got["SOURCE_EARLY_ENDS"] == 0


def test_the_stamp_source_numbers_its_words_from_each_restart_every_n_cycles():
    dut = StampSource(EngineConfig())
    seen = []

    async def bench(ctx):
        for every, cycles in ((3, 20), (2, 7), (0, 5)):
            ctx.set(dut.every, every)
            ctx.set(dut.restart, 1)
            await ctx.tick()
            ctx.set(dut.restart, 0)
            offers = []
            for cycle in range(cycles):
                if ctx.get(dut.source.valid):
                    offers.append((cycle, ctx.get(dut.source.payload.data)))
                await ctx.tick()
            seen.append(offers)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [[(c, c // 3) for c in range(0, 20, 3)], [(c, c // 2) for c in range(0, 7, 2)], []]


def test_the_example_digitizer_packs_two_samples_a_word_and_marks_its_frames():
    """hw/example_digitizer.py, the docs' example of a user's source (docs/source-port.md)."""
    dut = FramedRamp(every=3, frame_words=4)
    words = []

    async def bench(ctx):
        for _ in range(3 * 2 * 9 + 1):
            if ctx.get(dut.source.valid):
                words.append((ctx.get(dut.source.payload.data), ctx.get(dut.source.payload.last)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert words == [((2 * n + 1) << 16 | 2 * n, int(n % 4 == 3)) for n in range(9)]
