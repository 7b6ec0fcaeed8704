"""The system clock domain: the board's oscillator through an ECP5 PLL.

LiteEth makes its own 125 MHz domains from the PHY's receive clock; this makes only
``sync`` (the engine's clock, per board), held in reset until the PLL has locked. nextpnr derives the output's clock
constraint from the oscillator's through the PLL's dividers.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import ClockDomain, Elaboratable, Instance, Module, Signal
from amaranth.lib.cdc import ResetSynchronizer

VCO_HZ = (400e6, 800e6)
PFD_MIN_HZ = 3.125e6


@dataclass(frozen=True)
class PllSettings:
    """EHXPLLL dividers for one output fed back from itself (FEEDBK_PATH="CLKOP")."""

    input_divider: int
    feedback_divider: int
    output_divider: int

    @classmethod
    def exact(cls, input_hz: float, output_hz: float) -> "PllSettings":
        """The first dividers that give ``output_hz`` exactly, the VCO nearest mid-range."""
        for reference in range(1, 129):
            if input_hz / reference < PFD_MIN_HZ:
                break
            for feedback in range(1, 81):
                if abs(input_hz / reference * feedback - output_hz) > 1:
                    continue
                middle = sum(VCO_HZ) / 2
                output = min(range(1, 129), key=lambda d: abs(output_hz * d - middle))
                if VCO_HZ[0] <= output_hz * output <= VCO_HZ[1]:
                    return cls(reference, feedback, output)
        raise ValueError(f"no ECP5 PLL setting makes {output_hz / 1e6:g} MHz from {input_hz / 1e6:g} MHz")


class SystemClock(Elaboratable):
    """Drives the ``sync`` domain at ``output_hz`` from ``clock`` (the board oscillator)."""

    def __init__(self, clock, input_hz: float, output_hz: float) -> None:
        self.clock, self.input_hz, self.output_hz = clock, input_hz, output_hz
        self.settings = PllSettings.exact(input_hz, output_hz)

    def elaborate(self, platform) -> Module:
        m = Module()
        s = self.settings
        locked, output = Signal(), Signal()
        m.domains.sync = sync = ClockDomain("sync")
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=str(self.input_hz / 1e6), a_FREQUENCY_PIN_CLKOP=str(self.output_hz / 1e6),
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=s.input_divider, p_CLKFB_DIV=s.feedback_divider, p_CLKOP_DIV=s.output_divider,
            p_CLKOP_CPHASE=(s.output_divider - 1) // 2, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_CLKI=self.clock, i_CLKFB=output, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0,
            i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=output, o_LOCK=locked,
        )
        m.d.comb += sync.clk.eq(output)
        m.submodules.reset = ResetSynchronizer(~locked, domain="sync")
        return m
