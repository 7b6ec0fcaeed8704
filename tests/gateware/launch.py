"""Runs the gateware testbenches: each *_tb.py module runs inside Verilator.

pytest builds a component once per module (sim/hdl.py caches the build) and runs each
cocotb test in its own simulator process, so a failure names the test that failed.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from netblt.sim import hdl

HERE = Path(__file__).parent


def cases(module: str) -> list[str]:
    """The cocotb tests of a testbench module, in file order."""
    return [name for name in vars(importlib.import_module(module)) if name.startswith("test_")]


def cocotb_test(component_factory, name: str, module: str):
    """A parametrized pytest test running every cocotb test of ``module`` against ``name``."""

    @pytest.fixture(scope="module")
    def runner():
        return hdl.build(component_factory(), name)

    @pytest.mark.parametrize("case", cases(module))
    def test(runner, case):
        hdl.run(runner, name, module, HERE, testcase=case)

    return runner, test
