"""The PHY's management bus (IEEE 802.3 clause 22), kept by the board top, not LiteEth.

It releases the PHY from reset after ``reset_cycles``, then reads the PHY's status
register over and over and shows its link bit: the link LED. MDC runs at the system
clock / ``2 * half_period`` (1.56 MHz from 50 MHz; the limit is 2.5 MHz).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

STATUS_REGISTER = 1
LINK_UP = 1 << 2
"""Basic status register, bit 2: link status (latched low, so every read refreshes it)."""


def read_frame(phy_address: int, register: int) -> list[int | None]:
    """The bits the station drives for a clause-22 read, first first; None: released."""
    fields = [1] * 32 + [0, 1, 1, 0]
    fields += [(phy_address >> (4 - i)) & 1 for i in range(5)]
    fields += [(register >> (4 - i)) & 1 for i in range(5)]
    return fields + [None] * 18  # turnaround, then 16 data bits from the PHY


class MdioLinkMonitor(wiring.Component):
    def __init__(self, phy_address: int = 0, half_period: int = 16, reset_cycles: int = 500_000) -> None:
        self.phy_address, self.half_period, self.reset_cycles = phy_address, half_period, reset_cycles
        super().__init__({
            "phy_reset": Out(1), "mdc": Out(1), "mdio_o": Out(1), "mdio_oe": Out(1),
            "mdio_i": In(1), "link": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        frame = read_frame(self.phy_address, STATUS_REGISTER)
        drive = Const(sum((b or 0) << i for i, b in enumerate(frame)), len(frame))
        enable = Const(sum((b is not None) << i for i, b in enumerate(frame)), len(frame))

        resetting = Signal(range(self.reset_cycles + 1), init=self.reset_cycles)
        m.d.comb += self.phy_reset.eq(resetting != 0)
        with m.If(resetting != 0):
            m.d.sync += resetting.eq(resetting - 1)

        tick = Signal(range(self.half_period))
        bit = Signal(range(len(frame)))
        data = Signal(16)
        m.d.comb += [self.mdio_o.eq(drive.bit_select(bit, 1)), self.mdio_oe.eq(enable.bit_select(bit, 1))]
        with m.If(resetting == 0):
            m.d.sync += tick.eq(tick + 1)
            with m.If(tick == self.half_period - 1):
                m.d.sync += [tick.eq(0), self.mdc.eq(~self.mdc)]
                with m.If(self.mdc):
                    # Falling edge: the next bit goes out; the PHY's bits are read on the rising one.
                    m.d.sync += bit.eq(Mux(bit == len(frame) - 1, 0, bit + 1))
                    with m.If(bit == len(frame) - 1):
                        m.d.sync += self.link.eq((data & LINK_UP) != 0)
                with m.Else():
                    m.d.sync += data.eq(Cat(self.mdio_i, data[:15]))
        return m
