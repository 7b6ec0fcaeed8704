"""What every gateware testbench does first: the clock, a reset, settings."""

from __future__ import annotations

import os
from typing import Any

from amaranth.lib import data
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from netblt.gateware.config import EngineConfig

from .beats import pack

CONFIG = EngineConfig(data_width=int(os.environ.get("NETBLT_TB_DATA_WIDTH", "32")))
"""The configuration a testbench runs against: the default, or another data width
(launch.py builds the component and sets the variable to match)."""

CLOCK_NS = 1_000_000_000 // CONFIG.clock_hz
"""The system clock's period: the pacer's cycles are these."""


async def start(dut) -> None:
    """Starts the clock (again, after a previous case) and holds reset for two cycles."""
    Clock(dut.clk, CLOCK_NS, unit="ns").start()
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def apply(signal, layout: data.Layout, values: dict[str, Any]) -> None:
    signal.value = pack(layout, values)
