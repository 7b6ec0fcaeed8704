"""What every gateware testbench does first: the clock, a reset, settings."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from amaranth.lib import data
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout

from ...gateware.config import DramGeometry, EngineConfig
from ...hw.litedram import COMMAND_COUNTS
from .beats import pack, unpack
from .harness import period_ps

DRAM = json.loads(os.environ.get("NETBLT_TB_DRAM_DESCRIPTION") or "null")
"""The description of the LiteDRAM core in the top (hw/litedram_core.py), if it has one."""

CONFIG = EngineConfig(**{key: int(os.environ[f"NETBLT_TB_{key.upper()}"]) for key in
                         ("data_width", "clock_hz", "slot_bytes", "tx_slots", "rx_slots")
                         if f"NETBLT_TB_{key.upper()}" in os.environ},
                      dram=DramGeometry.of(DRAM) if DRAM else None)
"""The configuration a testbench runs against: the default, or one whose data width,
clock, slot size or slot counts the runner that built the component sets in the
environment, with its slots in the top's DRAM if it has one."""

CLOCK_PS = period_ps(CONFIG.clock_hz)
"""The system clock's period: the pacer's cycles are these."""


INPUTS = os.environ.get("NETBLT_TB_INPUTS", "").split()
"""The top's inputs, as sim/rtl/hdl.py's runner names them."""


async def start(dut, **held: int) -> None:
    """Starts the clock (again, after a previous case) and holds reset for two cycles;
    with a DRAM core, starts its clock too and waits for it to initialise itself.

    Every input of the top but its clocks is 0 from here on, or its value in ``held``,
    until the testbench drives it: in the hardware the logic before an input drives it
    from its reset on, while a simulation starts an undriven input at a random value (a
    random command taken in the first cycle after reset, here)."""
    for name in INPUTS:
        if not name.endswith("clk"):  # a clock is its own testbench's to start
            getattr(dut, name).value = held.get(name, 0)
    Clock(dut.clk, CLOCK_PS, unit="ps").start()
    dut.rst.value = 1
    if DRAM:
        Clock(dut.dram_clk, period_ps(DRAM["clock_hz"]), unit="ps").start()
        dut.dram_rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    if DRAM:
        dut.dram_rst.value = 0
        # LiteDRAM's init sequence waits some 70,000 DRAM cycles (DDR3's reset and clock
        # enable delays) before it hands the DRAM to the controller.
        await with_timeout(_dram_ready(dut), 5, "ms")
    await RisingEdge(dut.clk)


async def _dram_ready(dut) -> None:
    while not dut.dram_ready.value:
        await RisingEdge(dut.clk)


def dram_commands(dut) -> dict[str, int]:
    """The top's DRAM command counters (``dram_commands``, hw/litedram.py's layout) by kind."""
    return unpack(COMMAND_COUNTS, int(dut.dram_commands.value))


def apply(signal, layout: data.Layout, values: dict[str, Any]) -> None:
    signal.value = pack(layout, values)


def record(key: str, value: Any) -> None:
    """A benchmark's figures under ``key`` in the JSON file its runner reads back."""
    results = Path(os.environ.get("NETBLT_BENCH_RESULTS", "bench.json"))
    table = json.loads(results.read_text()) if results.exists() else {}
    table[key] = value
    results.write_text(json.dumps(table, indent=1))
