"""The board's clock domains: its oscillator through an ECP5 PLL.

LiteEth makes its own 125 MHz domains from the PHY's receive clock; this makes ``sync``
(the engine's clock, per board) and, for a board whose slots are in its DRAM, ``dram``
(the DRAM controller's) from a second output of the same VCO, each held in reset until
the PLL has locked. nextpnr derives each output's clock constraint from the
oscillator's through the PLL's dividers.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import ClockDomain, Elaboratable, Instance, Module, Signal
from amaranth.lib.cdc import ResetSynchronizer

VCO_HZ = (400e6, 800e6)
PFD_MIN_HZ = 3.125e6


@dataclass(frozen=True)
class PllSettings:
    """EHXPLLL dividers for a primary output fed back from itself (FEEDBK_PATH="CLKOP")
    and secondary outputs (CLKOS, CLKOS2, CLKOS3) from the same VCO."""

    input_divider: int
    feedback_divider: int
    output_divider: int
    secondary_dividers: tuple[int, ...] = ()

    @classmethod
    def exact(cls, input_hz: float, output_hz: float, *secondary_hz: float) -> PllSettings:
        """The first dividers that give ``output_hz`` and every one of ``secondary_hz``
        exactly, the VCO nearest mid-range."""
        if len(secondary_hz) > 3:
            raise ValueError(f"an ECP5 PLL has 3 secondary outputs, not {len(secondary_hz)}")
        middle = sum(VCO_HZ) / 2
        for reference in range(1, 129):
            if input_hz / reference < PFD_MIN_HZ:
                break
            for feedback in range(1, 81):
                if abs(input_hz / reference * feedback - output_hz) > 1:
                    continue
                fits = [d for d in range(1, 129) if VCO_HZ[0] <= output_hz * d <= VCO_HZ[1]
                        and all(_divides(output_hz * d, hz) for hz in secondary_hz)]
                if fits:
                    output = min(fits, key=lambda d: abs(output_hz * d - middle))
                    vco = output_hz * output
                    return cls(reference, feedback, output, tuple(round(vco / hz) for hz in secondary_hz))
        wanted = " and ".join(f"{hz / 1e6:g}" for hz in (output_hz, *secondary_hz))
        raise ValueError(f"no ECP5 PLL setting makes {wanted} MHz from {input_hz / 1e6:g} MHz")


def _divides(vco_hz: float, output_hz: float) -> bool:
    divider = round(vco_hz / output_hz)
    return 1 <= divider <= 128 and abs(vco_hz / divider - output_hz) <= 1


class SystemClock(Elaboratable):
    """Drives the ``sync`` domain at ``output_hz`` from ``clock`` (the board oscillator),
    and the ``dram`` domain at ``dram_hz`` if one is given."""

    def __init__(self, clock, input_hz: float, output_hz: float, dram_hz: float | None = None) -> None:
        self.clock, self.input_hz, self.output_hz, self.dram_hz = clock, input_hz, output_hz, dram_hz
        self.settings = PllSettings.exact(input_hz, output_hz, *([dram_hz] if dram_hz else []))

    def elaborate(self, platform) -> Module:
        m = Module()
        s = self.settings
        locked, output = Signal(), Signal()
        m.domains.sync = sync = ClockDomain("sync")
        secondary = {}
        if self.dram_hz:
            m.domains.dram = dram = ClockDomain("dram")
            port, divider = "CLKOS", s.secondary_dividers[0]
            # In phase with CLKOP, as ecppll sets it: the same coarse phase step.
            secondary = {f"a_FREQUENCY_PIN_{port}": str(self.dram_hz / 1e6), f"p_{port}_ENABLE": "ENABLED",
                         "p_OUTDIVIDER_MUXB": "DIVB", f"p_{port}_DIV": divider,
                         f"p_{port}_CPHASE": (s.output_divider - 1) // 2, f"p_{port}_FPHASE": 0,
                         f"o_{port}": dram.clk, f"i_EN{port}": 0}
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=str(self.input_hz / 1e6), a_FREQUENCY_PIN_CLKOP=str(self.output_hz / 1e6),
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_CLKOP_ENABLE="ENABLED",
            p_CLKI_DIV=s.input_divider, p_CLKFB_DIV=s.feedback_divider, p_CLKOP_DIV=s.output_divider,
            p_CLKOP_CPHASE=(s.output_divider - 1) // 2, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_CLKI=self.clock, i_CLKFB=output, i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0,
            i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1, i_PLLWAKESYNC=0, i_ENCLKOP=0,
            o_CLKOP=output, o_LOCK=locked, **secondary,
        )
        m.d.comb += sync.clk.eq(output)
        m.submodules.reset = ResetSynchronizer(~locked, domain="sync")
        if self.dram_hz:
            m.submodules.dram_reset = ResetSynchronizer(~locked, domain="dram")
        return m
