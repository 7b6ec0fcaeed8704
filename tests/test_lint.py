"""The simulated node's static checks (sim/rtl/lint.py), and the cause of Verilator 5.48's
difference kept as a design of two lines (docs/architecture.md, "Verilator 5.48's difference")."""

import functools

import pytest
from amaranth.back import verilog
from amaranth.hdl import Instance, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from netblt.hw.boards import BOARDS
from netblt.sim.rtl import hdl, lint, sim_board


class HalfConstant(wiring.Component):
    """A signal whose high half is a constant and whose low half a condition sets, in that
    order: the shape of the host link's datagram header (protocol and byte lanes constant,
    the data word set by its state machine)."""

    pick: In(1)
    out: Out(8)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.d.comb += self.out[4:].eq(0xA)
        with m.If(self.pick):
            m.d.comb += self.out[:4].eq(5)
        return m


class TwoDrivers(wiring.Component):
    """A core whose Verilog drives its output twice, which Yosys' check must report (Amaranth
    itself refuses such a design, and a combinational loop, in our own gateware)."""

    a: In(1)
    b: In(1)
    y: Out(1)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.core = Instance("twice", i_a=self.a, i_b=self.b, o_y=self.y)
        return m


TWICE = "module twice(input a, input b, output y);\n  assign y = a & b;\n  assign y = ~a;\nendmodule\n"


def test_amaranths_verilog_never_sets_the_constant_and_the_simulated_systemverilog_does(tmp_path):
    """The cause: Amaranth's Verilog sets the constant half in an ``always @*`` that reads
    nothing, which by the standard never runs (Verilator 5.48 follows it: the half stays
    0, where the hardware has the constant); the SystemVerilog every simulation here runs
    sets it in ``always_comb``, which runs at time zero."""
    plain, ours = tmp_path / "half.v", tmp_path / "half.sv"
    plain.write_text(verilog.convert(HalfConstant(), name="half", emit_src=False))
    ours.write_text(hdl.systemverilog(HalfConstant(), "half"))
    assert any("ALWNEVER" in line for line in lint.verilator_lint([plain], "half"))
    assert lint.verilator_lint([ours], "half") == []


node = functools.cache(lambda: sim_board.design(None))
"""The node the tests and sim-board simulate: engine, host link and the LiteEth core."""


@pytest.mark.rtl
def test_the_node_lints_clean_but_for_the_waivers(tmp_path):
    """Every -Wall rule not waived, with its reason, in sim/rtl/waivers.vlt holds on the node."""
    design = node()
    source = tmp_path / "node.sv"
    source.write_text(hdl.systemverilog(design.node, "node"))
    assert lint.verilator_lint([source, *design.sources], "node") == []


@pytest.mark.dram
def test_the_node_with_its_slots_in_dram_lints_clean_too(tmp_path):
    """The Versa's, with LiteDRAM's controller and its model of the chip."""
    design = sim_board.design(BOARDS["versa_ecp5"], "dram")
    source = tmp_path / f"{design.name}.sv"
    source.write_text(hdl.systemverilog(design.node, design.name))
    assert lint.verilator_lint([source, *design.sources], design.name) == []


@pytest.mark.rtl
def test_the_node_has_no_second_driver_no_undriven_bit_and_no_loop():
    design = node()
    assert lint.yosys_check(design.node, "node", design.sources) == []


def test_the_check_reports_a_signal_with_two_drivers(tmp_path):
    core = tmp_path / "twice.v"
    core.write_text(TWICE)
    problems = lint.yosys_check(TwoDrivers(), "two", [core])
    assert problems and "driver" in " ".join(problems)
