"""hw/alone.py: a part built alone keeps all of its logic behind registers, and its
critical paths are read from nextpnr's log."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from netblt.hw.alone import BehindRegisters, slowest_paths

FED = [1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0]


class Part(wiring.Component):
    a: In(4)
    b: In(2)
    y: Out(4)

    def __init__(self, plus: int) -> None:
        self.plus = plus
        super().__init__()

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.y.eq(self.a + self.b + self.plus)
        return m


def folded(plus: int, fed: list[int] = FED) -> list[int]:
    """The output pin, cycle by cycle, while ``fed`` goes into the input pin."""
    pin_in, pin_out = Signal(), Signal()
    top = BehindRegisters(Part(plus), pin_in, pin_out)
    seen = []

    async def bench(ctx):
        for bit in fed + [0] * 8:
            ctx.set(pin_in, bit)
            await ctx.tick()
            seen.append(ctx.get(pin_out))

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_the_parts_logic_reaches_the_output_pin_through_registers():
    assert folded(1) != folded(0)  # what the part computes shows at the pin
    flipped = folded(0, [1 - FED[0], *FED[1:]])
    first = next(i for i, (a, b) in enumerate(zip(folded(0), flipped)) if a != b)
    assert first >= 2  # the input bit passed a register before the part and one after


LOG = """Info: Max frequency for clock '$glbnet$clk': 56.33 MHz (PASS at 50.00 MHz)
Info: Critical path report for clock '$glbnet$clk' (posedge -> posedge):
Info: type curr  total name
Info:   clk-to-q  0.40  0.40 Source part.segmenter.remaining_TRELLIS_FF_Q_2.Q
Info:   routing  1.08  1.48 Net part.segmenter.remaining[2] (34,7) -> (33,8)
Info:                          Sink part.segmenter.size$CCU2_COMB0.A
Info:   logic  0.06  1.54 Source part.segmenter.size$CCU2_COMB0.FCO
Info:   logic  0.35  1.89 Source part.store.copies.WDO1
Info:   setup  0.00  1.89 Source part.store.copies.WD
Info: 0.81 ns logic, 1.08 ns routing

Info: Critical path report for cross-domain path '<async>' -> '<async>':
Info:   routing  3.29  3.29 Net reset
"""


def test_each_clocks_critical_path_is_read_hop_by_hop():
    lines = slowest_paths(LOG)
    assert lines[0] == "Critical path report for clock '$glbnet$clk' (posedge -> posedge):"
    assert [line.split()[:2] for line in lines[1:4]] == [["clk-to-q", "0.40"], ["routing", "1.08"], ["logic", "0.35"]]
    assert lines[4].strip() == "0.81 ns logic, 1.08 ns routing"
    assert len(lines) == 5  # the carry hop under 0.2 ns and the cross-domain path left out
