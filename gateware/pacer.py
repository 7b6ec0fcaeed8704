"""Burst-rate pacing (RFC 998 section 4): packet starts granted in clock cycles."""

from __future__ import annotations

from amaranth.hdl import Assert, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..formats.registers import PacingMode


class Pacer(wiring.Component):
    """Grants packet starts: ``burst_size`` per ``interval`` clock cycles.

    The protocol negotiates the interval in milliseconds; the driver converts it to
    cycles, so the hardware resolution is one clock. In BURSTS mode unused grants lapse
    at each interval boundary, as a burst is "at most burst_size packets". In SMOOTH
    mode a Bresenham accumulator spaces the starts; at most one burst of grants banks up
    while the link stalls. Changes take effect within two cycles.

    ``formal``: with the properties (:meth:`properties`), for SymbiYosys (sim/rtl/formal.py).
    """

    def __init__(self, formal: bool = False) -> None:
        self.formal = formal
        super().__init__({
            "mode": In(2),
            "burst_size": In(16),
            "interval": In(32),
            "grant": Out(1),
            "take": In(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        # Every comparison is between registers, never after an adder: the pacer runs
        # at the system clock on the slowest part (RFC 998 pacing, one-clock resolution).
        left = Signal(32)
        """Cycles until the interval ends; a shorter new interval ends it at once."""
        tokens = Signal(16)
        spread = Signal(32)
        """SMOOTH: burst_size is added each cycle; a grant is due each ``interval``."""
        slack = Signal(32)      # interval - burst_size, a cycle after either changes
        saturated = Signal()    # burst_size >= interval: a grant every cycle

        shrunk = Signal()       # left >= interval, a cycle late: the interval shrank
        boundary = Signal()     # the interval starts again this cycle
        m.d.comb += boundary.eq((left == 0) | shrunk)
        m.d.sync += [left.eq(Mux(boundary, self.interval - 1, left - 1)),
                     shrunk.eq(~boundary & (left >= self.interval)),
                     slack.eq(self.interval - self.burst_size),
                     saturated.eq(self.burst_size >= self.interval)]
        taken = Mux(self.take & self.grant, 1, 0)

        with m.Switch(self.mode):
            with m.Case(PacingMode.OFF):
                m.d.comb += self.grant.eq(1)
                m.d.sync += [tokens.eq(0), spread.eq(0)]
            with m.Case(PacingMode.BURSTS):
                fresh = Mux(boundary, self.burst_size, tokens)
                m.d.comb += self.grant.eq(fresh != 0)
                m.d.sync += tokens.eq(fresh - taken)
            with m.Case(PacingMode.SMOOTH):
                # spread + burst_size >= interval, without the adder before the compare.
                due = saturated | (spread >= slack)
                # Past one grant per cycle the rate saturates; the excess is not banked.
                m.d.sync += spread.eq(Mux(saturated, 0, Mux(due, spread - slack, spread + self.burst_size)))
                earned = Mux(due & (tokens < self.burst_size), 1, 0)
                m.d.comb += self.grant.eq(tokens != 0)
                m.d.sync += tokens.eq(tokens + earned - taken)
        if self.formal:
            self.properties(m, boundary, left, shrunk, tokens)
        return m

    def properties(self, m: Module, boundary: Value, left: Value, shrunk: Value, tokens: Value) -> None:
        """RFC 998's promise, for settings that hold still (the proof's harness assumes so):
        in BURSTS mode an interval starts every ``interval`` cycles and no more than
        ``burst_size`` grants are taken within one; in SMOOTH mode no more than a burst of
        grants banks up."""
        started, since, before = Signal(), Signal(32), Signal(17)
        """An interval has started since reset; cycles since it did; grants taken in it
        before this cycle."""
        take = self.take & self.grant
        taken = Mux(boundary, 0, before) + take
        m.d.sync += [started.eq(started | boundary), since.eq(Mux(boundary, 0, since + 1)), before.eq(taken)]
        counting = started & (self.interval != 0)
        with m.If(counting):
            m.d.comb += Assert(~boundary | (since == self.interval - 1), "an interval is interval cycles long")
            with m.If(self.mode == PacingMode.BURSTS):
                m.d.comb += Assert(taken <= self.burst_size, "at most a burst in an interval")
        with m.If(self.mode == PacingMode.SMOOTH):
            m.d.comb += Assert(tokens <= self.burst_size, "at most a burst banks up")
        self.invariants(m, counting, since, before, left, shrunk, tokens)

    def invariants(self, m: Module, counting: Value, since: Value, before: Value, left: Value, shrunk: Value,
                   tokens: Value) -> None:
        """What makes the proof close by induction: the pacer's own counts agree with the
        properties' (the interval's cycles, the tokens left)."""
        with m.If(counting):
            m.d.comb += Assert(~shrunk & (left + since == self.interval - 1), "the pacer counts the interval")
            with m.If(self.mode == PacingMode.BURSTS):
                m.d.comb += Assert(tokens + before == self.burst_size, "the tokens left are the burst less those taken")
