"""LiteDRAM's generated core under Verilator, with each board's chip modelled (dram_tb.py)."""

import functools
import json

import pytest
from launch import HERE

from netblt.hw import litedram_core
from netblt.hw.litedram import LiteDram
from netblt.sim import hdl


@functools.cache
def build(chip: str):
    description = litedram_core.generate(chip, hdl.BUILD / "litedram" / f"{chip}_model.v")
    return hdl.build(LiteDram(description), f"dram_{chip}", [hdl.BUILD / "litedram" / f"{chip}_model.v"]), description


@pytest.mark.xdist_group("dram")  # one worker builds both models
@pytest.mark.parametrize("chip", ["versa", "colorlight"])
def test_dram_core(chip):
    runner, description = build(chip)
    hdl.run(runner, f"dram_{chip}", "dram_tb", HERE, env={"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description)})
