"""LiteDRAM's generated core under Verilator, with each board's chip modelled: the core
alone (dram_tb.py), DramDma on it (dram_dma_tb.py), a DramSlots store (dram_slots_tb.py),
the receive and transmit stores in DRAM and in block RAM (receive_store_tb.py,
transmit_store_tb.py), and each side with its store in DRAM, through the same tests as
in block RAM (rx_tb.py, tx_tb.py), and the whole engine with its slots in DRAM
(engine_tb.py)."""

import functools
import json

import pytest
from launch import HERE, cases

from dram_harness import DmaHarness, SlotsHarness, receive_store_harness, transmit_store_harness

from netblt.gateware.config import EngineConfig
from netblt.hw import litedram_core
from netblt.hw.litedram import LiteDram
from netblt.sim import hdl
from netblt.sim.dram_tops import dram_engine, dram_receiver, dram_transmitter


@functools.cache
def build(chip: str, top: str = "dram"):
    """The chip's model core and a top around it: the core alone, or a harness."""
    core = hdl.BUILD / "litedram" / f"{chip}_model.v"
    description = litedram_core.generate(chip, core)
    tops = {"dram": LiteDram, "dma": DmaHarness, "slots": SlotsHarness, "receive": receive_store_harness,
            "transmit": transmit_store_harness, "receiver": lambda d: dram_receiver(EngineConfig(), d),
            "transmitter": lambda d: dram_transmitter(EngineConfig(), d),
            "engine": lambda d: dram_engine(EngineConfig(), d)}
    component = tops[top](description)
    return hdl.build(component, f"{top}_{chip}", [core]), description


@pytest.mark.parametrize("chip", ["versa", "colorlight"])
def test_dram_core(chip):
    runner, description = build(chip)
    hdl.run(runner, f"dram_{chip}", "dram_tb", HERE, env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})


@pytest.mark.parametrize("chip", ["versa", "colorlight"])
def test_dram_dma(chip):
    runner, description = build(chip, "dma")
    hdl.run(runner, f"dma_{chip}", "dram_dma_tb", HERE, env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})


@pytest.mark.parametrize("chip", ["versa", "colorlight"])
def test_dram_slots(chip):
    runner, description = build(chip, "slots")
    hdl.run(runner, f"slots_{chip}", "dram_slots_tb", HERE, env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})


STORES = {"receive": (receive_store_harness, "receive_store_tb"), "transmit": (transmit_store_harness, "transmit_store_tb")}


@pytest.mark.parametrize("chip", ["block", "versa", "colorlight"])
@pytest.mark.parametrize("side, case", [(side, case) for side, (_, module) in STORES.items() for case in cases(module)])
def test_store(side, case, chip):
    """The same script on the store in block RAM and in each chip's DRAM; each case in a
    simulation of its own (the Versa model's core, reset and initialised a second time in
    one simulation, loses writes)."""
    harness, module = STORES[side]
    if chip == "block":
        runner, description = hdl.build(harness(None), f"{side}_block"), None
    else:
        runner, description = build(chip, side)
    hdl.run(runner, f"{side}_{chip}", module, HERE, testcase=case,
            env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})


@pytest.mark.parametrize("case", cases("rx_tb"))
@pytest.mark.parametrize("chip", ["versa", "colorlight"])
def test_receiver_in_dram(chip, case):
    runner, description = build(chip, "receiver")
    hdl.run(runner, f"receiver_{chip}", "rx_tb", HERE, testcase=case,
            env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})


TIMED_TO_THE_CYCLE = {"test_burst_pacing", "test_smooth_pacing", "test_data_checksums_summed_while_written"}
"""tx_tb cases that judge by when packets start, to the cycle (the pacing, and the gaps a
read pass for a checksum leaves). A packet is fetched once granted, while the one before
it is sent; with the store in DRAM its fetch takes a time that varies (the benchmark
measured starts up to 166 cycles late on the Versa model, 647 on the Colorlight's), so a
paced packet's start varies by that much after its grant. The pacer still grants burst_size packets an interval: only starts move
(docs/architecture.md)."""


@pytest.mark.parametrize("case", [case for case in cases("tx_tb") if case not in TIMED_TO_THE_CYCLE])
@pytest.mark.parametrize("chip", ["versa", "colorlight"])
def test_transmitter_in_dram(chip, case):
    runner, description = build(chip, "transmitter")
    hdl.run(runner, f"transmitter_{chip}", "tx_tb", HERE, testcase=case,
            env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})


@pytest.mark.parametrize("case", cases("engine_tb"))
@pytest.mark.parametrize("chip", ["versa", "colorlight"])
def test_engine_in_dram(chip, case):
    """The whole engine, both stores on one chip through the core's two ports."""
    runner, description = build(chip, "engine")
    hdl.run(runner, f"engine_{chip}", "engine_tb", HERE, testcase=case,
            env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})
