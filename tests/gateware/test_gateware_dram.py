"""LiteDRAM's generated core under Verilator, with each board's chip modelled: the core
alone (dram_tb.py), DramDma on it (dram_dma_tb.py), a DramSlots store (dram_slots_tb.py),
the receive and transmit stores in the Versa's DRAM and in block RAM (receive_store_tb.py,
transmit_store_tb.py), and each side with its store in the Versa's DRAM, through the same
tests as in block RAM (rx_tb.py, tx_tb.py), and the whole engine with its slots in DRAM
(engine_tb.py)."""

import functools
import json

import pytest
from launch import HERE, cases

from dram_harness import DmaHarness, SlotsHarness, receive_store_harness, transmit_store_harness
from dram_tb import REFRESH_GRANT

from netblt.gateware.config import DramGeometry, EngineConfig
from netblt.hw import litedram_core
from netblt.hw.litedram import LiteDram
from netblt.sim.rtl import hdl
from netblt.sim.rtl.dram_tops import dram_engine, dram_receiver, dram_transmitter


@functools.cache
def build(chip: str, top: str = "dram"):
    """The chip's model core and a top around it: the core alone, or a harness; for chip
    "block", a store harness in block RAM, with no core."""
    if chip == "block":
        return hdl.build(STORES[top][0](None), f"{top}_block"), None
    core = hdl.BUILD / "litedram" / f"{chip}_model.v"
    description = litedram_core.generate(chip, core)
    tops = {"dram": lambda d: LiteDram(DramGeometry.of(d)), "dma": DmaHarness, "slots": SlotsHarness, "receive": receive_store_harness,
            "transmit": transmit_store_harness, "receiver": lambda d: dram_receiver(EngineConfig(), d),
            "transmitter": lambda d: dram_transmitter(EngineConfig(), d),
            "engine": lambda d: dram_engine(EngineConfig(), d)}
    component = tops[top](description)
    return hdl.build(component, f"{top}_{chip}", [core], inner=[REFRESH_GRANT]), description


def run(chip: str, top: str, module: str, case: str | None = None) -> None:
    """Testbench ``module`` (one case of it, or all) on ``top`` over the chip's model (or
    in block RAM)."""
    runner, description = build(chip, top)
    hdl.run(runner, f"{top}_{chip}", module, HERE, testcase=case,
            env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})


def in_build(top: str, *middle: str, chip: str):
    """The case (top, *middle, chip) of build ``top``_``chip``, in that build's
    ``xdist_group``: the worker that builds it runs its cases, where split ones had the
    other worker wait for the build, idle (sim/rtl/hdl.py builds a folder one process at a
    time). Each is a Verilator build of some 40 s, fourteen in all: `make test-dram`, a
    CI step of its own, runs them."""
    marks = [pytest.mark.xdist_group(f"{top}_{chip}"), pytest.mark.dram]
    return pytest.param(top, *middle, chip, marks=marks)


CHIPS = ["versa", "colorlight"]


@pytest.mark.parametrize("top, module, chip", [in_build(top, module, chip=chip) for chip in CHIPS
                                               for top, module in [("dram", "dram_tb"), ("dma", "dram_dma_tb"),
                                                                   ("slots", "dram_slots_tb")]])
def test_dram_block(top, module, chip):
    """The core alone, DramDma on it, and a DramSlots store."""
    run(chip, top, module)


STORES = {"receive": (receive_store_harness, "receive_store_tb"), "transmit": (transmit_store_harness, "transmit_store_tb")}


@pytest.mark.parametrize("side, case, chip", [in_build(side, case, chip=chip) for chip in ["block", "versa"]
                                              for side, (_, module) in STORES.items() for case in cases(module)])
def test_store(side, case, chip):
    """The same script on the store in block RAM and in the Versa's DRAM; each case in a
    simulation of its own (the Versa model's core, reset and initialised a second time in
    one simulation, loses writes). On the Colorlight's SDRAM the stores run inside the
    engine's tests (test_in_dram): two Verilator models fewer for make test's budget."""
    run(chip, side, STORES[side][1], case)


TIMED_TO_THE_CYCLE = {"test_burst_pacing", "test_smooth_pacing", "test_data_checksums_summed_while_written"}
"""tx_tb cases that judge by when packets start, to the cycle (the pacing, and the gaps a
read pass for a checksum leaves). A packet is fetched once granted, while the one before
it is sent; with the store in DRAM its fetch takes a time that varies (the benchmark
measured starts up to 166 cycles late on the Versa model, 647 on the Colorlight's), so a
paced packet's start varies by that much after its grant. The pacer still grants
burst_size packets an interval: only starts move (docs/architecture.md)."""

SIDES = [("receiver", "rx_tb", cases("rx_tb"), ["versa"]),
         ("transmitter", "tx_tb", [case for case in cases("tx_tb") if case not in TIMED_TO_THE_CYCLE], ["versa"]),
         ("engine", "engine_tb", cases("engine_tb"), CHIPS)]
"""The Receiver, the Transmitter and the whole engine (both stores on one chip, through
the core's two ports), each with its slots in DRAM, through their own testbenches; each
case in a simulation of its own (run in one simulation, with the core reset for each
case, 12 of the 44 cases failed and one hung). The Receiver and the Transmitter alone
run on the Versa's DDR3 only, the chip whose build numbers 16 slots: on the Colorlight's
SDRAM the engine, with both sides and both stores in it, stands for them (two Verilator
models fewer for make test's budget)."""


@pytest.mark.parametrize("top, module, case, chip", [in_build(top, module, case, chip=chip)
                                                     for top, module, names, chips in SIDES
                                                     for chip in chips for case in names])
def test_in_dram(top, module, case, chip):
    run(chip, top, module, case)
