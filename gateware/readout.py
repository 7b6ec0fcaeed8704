"""Register readout that fits a small FPGA: a tree read mux, and counters in LUT RAM.

Both exist for the Colorlight with its slots in DRAM, which filled 97.7% of its LUTs.
An Amaranth ``Array`` read or a ``Switch`` of assignments is a parallel-case mux, which
Yosys maps onto the ECP5's LUTs at about twice the size of a tree of two-way muxes; and
a 32-bit counter held in flip-flops costs an adder and a read-mux input of its own.
Figures: docs/benchmarks.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, ceil_log2


def tree_select(words: Sequence[Value | int], index: Value, width: int = 32) -> Value:
    """``words[index]`` (0 past the last), each word zero-extended or cut to ``width``."""
    levels = ceil_log2(len(words))
    leaves = [Cat(Const(w, width) if isinstance(w, int) else w, Const(0, width))[:width] for w in words]
    leaves += [Const(0, width)] * ((1 << levels) - len(words))
    if levels == 0:
        return Mux(index.any(), 0, leaves[0])
    return Mux(index[levels:].any(), 0, Cat(*leaves).word_select(index[:levels], width))


def register_select(m: Module, index: Value, words: Sequence[Value | int], counters: CounterBank,
                    first: int) -> Value:
    """A register block's read: ``words[index]``, except that ``counters`` (whose ``read``
    this drives) answer from index ``first`` on."""
    counter = (index - first)[:len(index)]
    m.d.comb += counters.read.eq(counter)
    return Mux(counter < counters.count, counters.value, tree_select(words, index))


class CounterBank(wiring.Component):
    """32-bit counters that wrap, kept in LUT RAM: two 32-bit adders for all of them.

    Each cycle ``add[i]`` is added to counter i. A counter gathers its adds in a narrow
    register; a sweep moves one counter's gathered adds into the RAM each cycle, so no
    gather overflows between two visits. ``value`` is counter ``read`` now, the RAM's
    word plus what it has gathered: exact on any cycle, as a register would be. ``clear``
    zeroes them all at once (a counter's RAM word is ignored until the sweep rewrites it).
    """

    def __init__(self, count: int, most: int = 1) -> None:
        self.count = count
        self.gather_width = bits_for(count * most)
        super().__init__({"add": In(data.ArrayLayout(range(most + 1), count)), "clear": In(1),
                          "read": In(range(count)), "value": Out(32)})

    def elaborate(self, platform) -> Module:
        m = Module()
        n = self.count
        m.submodules.words = words = memory.Memory(shape=32, depth=n, init=[])
        write, swept, looked = words.write_port(), words.read_port(domain="comb"), words.read_port(domain="comb")
        at = Signal(range(n))
        m.d.sync += at.eq(Mux(at == n - 1, 0, at + 1))
        gathered = [Signal(self.gather_width, name=f"gathered{i}") for i in range(n)]
        stale = Signal(n)
        """Cleared since the sweep last wrote the counter: its RAM word counts as 0."""

        m.d.comb += [swept.addr.eq(at), write.addr.eq(at), write.en.eq(1),
                     write.data.eq(Mux(stale.bit_select(at, 1), 0, swept.data) + tree_select(gathered, at)),
                     looked.addr.eq(self.read),
                     self.value.eq(Mux(stale.bit_select(self.read, 1), 0, looked.data)
                                   + tree_select(gathered, self.read))]
        with m.If(self.clear):
            m.d.sync += [g.eq(0) for g in gathered]
            m.d.sync += stale.eq(~0)
        with m.Else():
            for i, g in enumerate(gathered):
                m.d.sync += g.eq(Mux(at == i, 0, g) + self.add[i])
            m.d.sync += stale.bit_select(at, 1).eq(0)
        return m
