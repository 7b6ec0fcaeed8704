"""What every gateware testbench does first: clock, reset, settings."""

from __future__ import annotations

from typing import Any

from amaranth.lib import data
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from netblt.sim.beats import pack

CLOCK_NS = 20
"""50 MHz, the default system clock."""


async def start(dut) -> None:
    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def apply(signal, layout: data.Layout, values: dict[str, Any]) -> None:
    signal.value = pack(layout, values)


async def cycles(dut, n: int) -> None:
    await ClockCycles(dut.clk, n)
