"""gateware/readout.py in Amaranth's simulator, against plain Python lists and counts."""

import random

import pytest
from amaranth.hdl import Const, Module, Signal
from amaranth.sim import Simulator

from netblt.gateware.readout import CounterBank, tree_select


@pytest.mark.parametrize("count", [1, 5, 8, 23])
def test_tree_select_is_the_list_then_zero(count):
    words = [random.Random(count).getrandbits(20) for _ in range(count)]
    index = Signal(8)
    out = Signal(32)
    m = Module()
    m.d.comb += out.eq(tree_select([Const(w, 20) if i % 2 else w for i, w in enumerate(words)], index))
    sim = Simulator(m)

    async def bench(ctx):
        for i in range(256):
            ctx.set(index, i)
            assert ctx.get(out) == (words[i] if i < count else 0), i

    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("count,most,quiet", [(5, 3, False), (1, 1, False), (19, 1, False), (7, 3, True)])
def test_counter_bank_reads_exact_counts_every_cycle(count, most, quiet):
    """Adds on every counter every cycle (at their largest, so the gathers fill), or in
    sparse bursts (``quiet``), clears now and then, and every counter read back on every
    cycle against the model."""
    dut = CounterBank(count, most)
    rng = random.Random(count * 10 + most)
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def bench(ctx):
        counts = [0] * count
        for cycle in range(600):
            adds = [0 if quiet and rng.random() < 0.8 else rng.choice([most, most, rng.randint(0, most)])
                    for _ in range(count)]
            clear = rng.random() < 0.02
            for i, a in enumerate(adds):
                ctx.set(dut.add[i], a)
            ctx.set(dut.clear, clear)
            for i in range(count):
                ctx.set(dut.read, i)
                assert ctx.get(dut.value) == counts[i], (cycle, i)
            await ctx.tick()
            counts = [0] * count if clear else [(c + a) % 2**32 for c, a in zip(counts, adds)]
        assert max(counts) > 0

    sim.add_testbench(bench)
    sim.run()
