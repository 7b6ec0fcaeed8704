"""The test harness itself: what make test's parallel run relies on."""

import os
import subprocess
import sys

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from netblt.sim.rtl import hdl
from netblt.sim.rtl.hdl import out_of_date, ports_sorted


@pytest.mark.xdist_group("harness")
def test_a_group_stays_on_one_worker(request):
    """make test runs two workers with ``--dist loadgroup``; an ``xdist_group`` keeps a
    component's cases on the worker that built it, and a module's tests with the
    simulated board its fixture started. xdist learns a test's group from a suffix it
    puts on the test's id; where pytest ignores that (pytest 9.2 with xdist 3.8,
    pytest-xdist issue 1386), groups split across workers. (Builds stay whole even so:
    sim/rtl/hdl.py lets one process at a time build a folder. Before it did, split groups
    had two workers build one folder at once, and builds failed at random.)
    pyproject.toml pins a pytest that keeps the suffix."""
    if not getattr(request.config.option, "loadgroup", False):  # xdist sets it on a loadgroup worker
        pytest.skip("runs only under make test's --dist loadgroup")
    assert request.node.nodeid.endswith("@harness")


TWO_DOMAINS = """
from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

class TwoDomains(wiring.Component):
    def __init__(self):
        super().__init__({"a": In(1), "b": Out(1)})

    def elaborate(self, platform):
        m, x = Module(), Signal()
        m.d.sync += x.eq(self.a)
        m.d.dram += self.b.eq(x)
        return m

print(verilog.convert(TwoDomains(), name="two", emit_src=False))
"""


def test_a_design_converted_by_two_processes_is_one_build():
    """Amaranth orders the clock and reset ports of the domains it creates by a set's
    iteration, so processes with different hash seeds (make test's workers, a sim-board
    they start) write one two-domain design with its ports in different orders (seeds 0
    and 2 do). sim/rtl/hdl.py compares designs with their ports sorted, and rebuilds only
    for a real change."""
    texts = [subprocess.run([sys.executable, "-c", TWO_DOMAINS], capture_output=True, text=True, check=True,
                            env=os.environ | {"PYTHONHASHSEED": seed}).stdout for seed in ("0", "2")]
    assert texts[0] != texts[1]
    assert ports_sorted(texts[0]) == ports_sorted(texts[1])
    assert ports_sorted(texts[0]) != ports_sorted(texts[0].replace("dram_rst", "dram_reset", 1))
    assert ports_sorted(texts[0]) != ports_sorted(texts[0].replace("= a;", "= ~a;", 1))


def test_a_build_is_announced_only_when_there_is_something_to_build(tmp_path):
    """netblt sim-board says it is building (minutes) only when it is: no program yet, or
    a source newer than the program; a start with nothing to build is quiet."""
    program, source, core = tmp_path / "node", tmp_path / "node.v", tmp_path / "liteeth.v"
    source.write_text("module node; endmodule")
    core.write_text("module core; endmodule")
    assert out_of_date(program, [source, core])
    program.write_text("built")
    os.utime(source, (1000, 1000))
    os.utime(core, (1000, 1000))
    assert not out_of_date(program, [source, core])
    os.utime(core, None)
    os.utime(program, (2000, 2000))
    assert out_of_date(program, [source, core])


class Inverter(wiring.Component):
    a: In(1)
    b: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.b.eq(~self.a)
        return m


def test_a_design_is_converted_again_only_when_its_python_changed(tmp_path, monkeypatch):
    """sim-board converts its design to Verilog (some 7 s) only when the Python it is made
    of changed since the last conversion, by the fingerprint it keeps beside the Verilog."""
    conversions = []
    convert = hdl.systemverilog
    monkeypatch.setattr(hdl, "systemverilog", lambda *args: conversions.append(1) or convert(*args))
    source = hdl.converted(Inverter(), tmp_path, "inverter")
    assert "~" in source.read_text() and len(conversions) == 1
    assert hdl.converted(Inverter(), tmp_path, "inverter") == source and len(conversions) == 1
    monkeypatch.setattr(hdl, "design_fingerprint", lambda name: "the gateware changed")
    hdl.converted(Inverter(), tmp_path, "inverter")
    assert len(conversions) == 2


def test_the_fingerprint_follows_the_gateware_sources(tmp_path, monkeypatch):
    for folder in hdl.DESIGN_FOLDERS:
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "part.py").write_text(f"# {folder}\n")
    monkeypatch.setattr(hdl, "ROOT", tmp_path)
    before = hdl.design_fingerprint("node")
    assert hdl.design_fingerprint("node_versa_ecp5_dram") != before
    (tmp_path / "gateware" / "part.py").write_text("# changed\n")
    assert hdl.design_fingerprint("node") != before
