"""The simulated designs' static checks, for what a simulation of some sequences misses.

- :func:`verilator_lint`: Verilator's ``--lint-only -Wall``, with the waivers of
  sim/rtl/waivers.vlt (each with its reason) and nothing else, on the SystemVerilog every
  simulation here runs (sim/rtl/hdl.py) and the cores it instantiates;
- :func:`yosys_check`: Yosys' ``check`` on the flattened design: no signal with
  two drivers, none undriven, no combinational loop, judged bit by bit.

The builds themselves run with ``-Wno-fatal`` (Verilator's default warnings would stop
them on the LiteX cores' style); these checks are where the warnings are read.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from amaranth.back import rtlil
from amaranth.lib import wiring

from . import hdl

WAIVERS = Path(__file__).with_name("waivers.vlt")
WARNING = re.compile(r"^%(Warning|Error)-?[A-Z]*:.*$", re.MULTILINE)
TIMESCALE = "1ns/1ps"
"""The time unit LiteEth's Verilog declares, given to the modules that declare none."""


def verilator_lint(sources: Sequence[Path], top: str) -> list[str]:
    """Verilator's -Wall warnings on ``sources`` (top module ``top``) that no waiver covers,
    one line each."""
    done = subprocess.run([str(hdl.VERILATOR_BIN / "verilator"), "--lint-only", "-Wall", "--timescale", TIMESCALE,
                           "--top-module", top, str(WAIVERS), *map(str, sources)], capture_output=True, text=True)
    found = [match[0] for match in WARNING.finditer(done.stderr)]
    if done.returncode and not found:
        raise RuntimeError(f"Verilator's lint of {top} failed: {done.stderr.strip()[-2000:]}")
    return found


def yosys_check(component: wiring.Component, name: str, sources: Sequence[Path] = ()) -> list[str]:
    """The problems Yosys' check finds in ``component`` (as module ``name``, its instances'
    Verilog in ``sources``) once flattened; empty when there are none."""
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / f"{name}.il").write_text(rtlil.convert(component, name=name, emit_src=False))
        done = hdl.yosys([f"read_rtlil {name}.il", f"hierarchy -top {name}", "proc", "flatten", "opt_clean", "check"],
                         Path(directory), sources)
    if done.returncode:
        raise RuntimeError(f"Yosys could not read {name}: {done.stdout.strip()[-2000:]}")
    report = done.stdout.split("Executing CHECK pass", 1)[-1]
    count = re.search(r"Found and reported (\d+) problems", report)
    if not count:
        raise RuntimeError(f"Yosys' check of {name} gave no count: {report[-2000:]}")
    problems = re.findall(r"^Warning: (.*)$", report, re.MULTILINE)
    return problems or [f"{count[1]} problems (see Yosys' log)"] * (count[1] != "0")
