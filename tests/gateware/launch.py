"""Runs the gateware testbenches: each *_tb.py module runs inside Verilator.

pytest builds a component once per session (sim/rtl/hdl.py also keeps the build on disk)
and runs all of a module's cocotb tests in one simulation, the first time one of them is
asked for; each pytest case then passes or fails as its cocotb test did, so a failure
names the test that failed. (Each case starts its clock and holds reset again.)
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import pytest

from netblt.gateware.config import EngineConfig
from netblt.sim.rtl import hdl

HERE = Path(__file__).parent


def cases(module: str) -> list[str]:
    """The cocotb tests of a testbench module, in file order."""
    return [name for name in vars(importlib.import_module(module)) if name.startswith("test_")]


def cocotb_test(component_factory, name: str, module: str, sources=tuple, apart: bool = False, **geometry: int):
    """A parametrized pytest test running every cocotb test of ``module`` against ``name``,
    built (once) by ``component_factory(config)`` for the default configuration with
    ``geometry``'s sizes (those sim/testbench.CONFIG reads: data_width, tx_slots, ...),
    with the Verilog files ``sources()`` returns (generated when the build happens).
    ``apart``: each case in a simulation of its own, for a top whose state outlives a
    reset (the integrated node: LiteEth's, and the host link's session)."""
    build = functools.cache(lambda: hdl.build(component_factory(EngineConfig(**geometry)), name, sources()))

    env = {f"NETBLT_TB_{key.upper()}": str(value) for key, value in geometry.items()}
    together = functools.cache(lambda: hdl.run_once(build(), name, module, HERE, cases(module), env=env))

    @pytest.mark.xdist_group(name)  # one worker builds and runs it: no two builds in one folder
    @pytest.mark.parametrize("case", cases(module))
    def test(case):
        outcome = hdl.run_once(build(), name, module, HERE, [case], env=env) if apart else together()
        if failure := outcome[case]:
            pytest.fail(failure, pytrace=False)

    return test
