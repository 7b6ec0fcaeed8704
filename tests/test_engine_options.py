"""Build options of the engine, in Amaranth's simulator: an engine built without the
pattern source or the sink port rejects FILL or DRAIN and counts it, one built with them
runs them, and one built with the pattern checker counts the words drained that are not
the pattern (here every word: the slots hold zeros); GEOMETRY reports the slots and bitmaps built, up
to the 16 slots each way that the commands' slot field numbers; counters whose strobes
are registered twice count a cycle later, once."""

import pytest
from engine_bus import EngineBus
from amaranth.sim import Simulator

from netblt.gateware.config import MAX_SLOTS, EngineConfig
from netblt.gateware.engine import Engine
from netblt.formats.registers import ADDRESS, COMMAND_WORD, EVENT_WORD, GEOMETRY_WORD, Command, Event


def run_commands(config: EngineConfig, commands: list[Command], slot: int = 0,
                 flag: int = 0) -> tuple[int, list[int], dict]:
    """COMMANDS_REJECTED, the event words and GEOMETRY's fields after ``commands`` on
    ``slot`` with ``flag``, each with an argument of buffer 1 and 64 bytes."""
    dut = Engine(config)
    result = {}

    async def bench(ctx):
        engine = EngineBus(ctx, dut.bus)
        write, read = engine.write, engine.read

        for op in commands:
            await write("ARG0", 1)
            await write("ARG1", 64)  # 16 words
            await write("COMMAND", COMMAND_WORD.pack(op=op, slot=slot, flag=flag))
            await ctx.tick().repeat(200)
        result["rejected"] = await read("COMMANDS_REJECTED")
        kinds = []
        while word := await read("EVENT"):
            kinds.append(word)
        result["events"] = kinds
        result["geometry"] = GEOMETRY_WORD.unpack(await read("GEOMETRY"))

    async def sink(ctx):
        if config.sink:
            ctx.set(dut.sink.ready, 1)

    sim = Simulator(dut)
    sim.add_clock(1 / config.clock_hz)
    sim.add_testbench(bench)
    sim.add_testbench(sink)
    sim.run()
    return result["rejected"], result["events"], result["geometry"]


@pytest.mark.parametrize("fill, sink, check", [(False, False, False), (True, True, False), (True, True, True)])
def test_fill_and_drain_exist_only_where_the_build_has_their_blocks(fill, sink, check):
    config = EngineConfig(slot_bytes=1024, max_packets=32, fifo_depth=16, fill=fill, sink=sink, check=check)
    rejected, events, geometry = run_commands(config, [Command.FILL, Command.DRAIN])
    assert rejected == (not fill) + (not sink)
    assert [EVENT_WORD.unpack(e)["kind"] for e in events] == [Event.FILLED] * fill + [Event.DRAINED] * sink
    if sink:  # buffer 1's pattern is not the zeros the slot holds: every word differs
        assert EVENT_WORD.unpack(events[-1])["value"] == (16 if check else 0)
    assert (geometry["fill"], geometry["sink"], geometry["check"]) == (fill, sink, check)


def test_a_fill_with_its_flag_raises_no_event():
    """The host queues a FILL with its slot's SEND: the SENT event is the one it needs."""
    config = EngineConfig(slot_bytes=1024, max_packets=32, fifo_depth=16)
    assert run_commands(config, [Command.FILL], flag=1)[:2] == (0, [])
    rejected, events, _ = run_commands(config, [Command.FILL], flag=0)
    assert rejected == 0 and [EVENT_WORD.unpack(e)["kind"] for e in events] == [Event.FILLED]


@pytest.mark.parametrize("slots, max_packets", [(2, 32), (MAX_SLOTS, 4096)])
def test_geometry_reports_the_slots_and_bitmaps_built(slots, max_packets):
    """The last slot takes commands: with 16 slots, slot 15 is FILLed and DRAINed."""
    config = EngineConfig(tx_slots=slots, rx_slots=slots, slot_bytes=1024, max_packets=max_packets,
                          fifo_depth=16)
    rejected, events, geometry = run_commands(config, [Command.FILL, Command.DRAIN], slot=slots - 1)
    assert rejected == 0 and [EVENT_WORD.unpack(e)["kind"] for e in events] == [Event.FILLED, Event.DRAINED]
    assert geometry == {"data_width": 32, "tx_slots": slots, "rx_slots": slots,
                        "log2_max_packets": max_packets.bit_length() - 1, "fill": 1, "check": 1,
                        "take": 1, "sink": 1}


def cycles_until_counted(config: EngineConfig) -> tuple[int, int]:
    """The cycles from a rejected command's write to COMMANDS_REJECTED showing it (read
    every cycle), and the count 40 cycles on."""
    dut = Engine(config)
    result = {}

    async def bench(ctx):
        ctx.set(dut.bus.addr, ADDRESS["COMMAND"])
        ctx.set(dut.bus.w_data, COMMAND_WORD.pack(op=15, slot=0))  # no such operation
        ctx.set(dut.bus.w_en, 1)
        await ctx.tick()
        ctx.set(dut.bus.w_en, 0)
        ctx.set(dut.bus.addr, ADDRESS["COMMANDS_REJECTED"])
        ctx.set(dut.bus.r_en, 1)
        for cycle in range(1, 41):
            await ctx.tick()
            if ctx.get(dut.bus.r_data) and "cycles" not in result:
                result["cycles"] = cycle
        result["count"] = ctx.get(dut.bus.r_data)

    sim = Simulator(dut)
    sim.add_clock(1 / config.clock_hz)
    sim.add_testbench(bench)
    sim.run()
    return result["cycles"], result["count"]


def test_counter_strobes_registered_twice_count_a_cycle_later_and_once():
    """``counter_delay=2`` (the Colorlight's DRAM build) passes each counter's strobe
    through a second register: the count lands a cycle later than at 1, and only once."""
    small = dict(slot_bytes=1024, max_packets=32, fifo_depth=16)
    once, counted_once = cycles_until_counted(EngineConfig(**small))
    twice, counted_twice = cycles_until_counted(EngineConfig(**small, counter_delay=2))
    assert (counted_once, counted_twice) == (1, 1)
    assert twice == once + 1
