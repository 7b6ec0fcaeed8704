"""One part of a board's DRAM build, built alone on the board's FPGA: its routed timing.

    python -m netblt.hw.alone --board versa_ecp5 --part engine   [--output DIR] [--seed N]
    python -m netblt.hw.alone --board versa_ecp5 --part dram

nextpnr names critical paths only once it has routed, and a whole build too crowded to
route (the Versa's with its slots in DRAM) never gets there. Routed with router2, as the
DRAM builds are (the Versa's engine alone: router1 still had 43,000 arcs to route
after 20 minutes). Alone, a part routes: the
engine of the board's DRAM build (its ports to the DRAM core included), or the board's
LiteDRAM core on its pins. Every port is behind a register, inputs from a shift chain
on one pin and outputs folded into another, so no logic is lost and every path starts
and ends at a flip-flop. Prints each clock's Fmax against its constraint, the cells
used, and each clock's critical path (in nextpnr's log, alone.tim, in full).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from amaranth.hdl import Cat, Elaboratable, Module, Signal, Value
from amaranth.lib import wiring

from ..gateware.config import DramGeometry
from ..gateware.engine import Engine
from . import litedram_core
from .boards import BOARDS, Board, dram_pins
from .build import ROOT, ROUTER2, build_folder, summary, toolchain_stopped, tools_environment
from .clocking import SystemClock
from .litedram import LiteDram
from .nextpnr import read_report

NAME = "alone"


class BehindRegisters(Elaboratable):
    """``inner`` (a component in ``sync``) with each input from a register of a shift
    chain fed by ``pin_in`` and each output into a register, all of them XOR-folded
    into ``pin_out``."""

    def __init__(self, inner: wiring.Component, pin_in: Value, pin_out: Value) -> None:
        self.inner, self.pin_in, self.pin_out = inner, pin_in, pin_out

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.inner = inner = self.inner
        chain, outputs = self.pin_in, []
        for _, member, value in inner.signature.flatten(inner):
            value = Value.cast(value)
            register = Signal(len(value))
            if member.flow == wiring.In:
                m.d.sync += register.eq(Cat(chain, register[:-1]))
                m.d.comb += value.eq(register)
                chain = register[-1]
            else:
                m.d.sync += register.eq(value)
                outputs.append(register)
        folded = Signal()
        m.d.sync += folded.eq(Cat(*outputs).xor() ^ chain)
        m.d.comb += self.pin_out.eq(folded)
        return m


class PartTop(Elaboratable):
    """``part`` ("engine" or "dram") of ``board``'s DRAM build, on its pins and clocks."""

    def __init__(self, board: Board, part: str, dram: dict) -> None:
        self.board, self.part, self.dram = board, part, dram

    def elaborate(self, platform) -> Module:
        board = self.board.built("dram")
        config = replace(board.config, dram=DramGeometry.of(self.dram))
        m = Module()
        oscillator = platform.request(board.clock, 0)
        switch = "switch" if any(r.name == "switch" for r in platform.resources.values()) else "button"
        pin_in, pin_out = platform.request(switch, 0).i, platform.request("led", 0).o
        if self.part == "engine":
            m.submodules.clock = SystemClock(oscillator.i, board.clock_hz, config.clock_hz)
            inner = Engine(config)
        else:
            board_dram, dram_hz = dram_pins(m, platform, board, self.dram, oscillator.i)
            m.submodules.clock = SystemClock(oscillator.i, board.clock_hz, config.clock_hz, dram_hz)
            inner = LiteDram(config.dram, board_dram)
        m.submodules.part = BehindRegisters(inner, pin_in, pin_out)
        return m


def slowest_paths(log: str) -> list[str]:
    """Each clock's critical path as nextpnr's log reports it, a line a hop of 0.2 ns
    or more (a carry chain's hops are shorter)."""
    out, inside = [], False
    for line in log.splitlines():
        if "Critical path report" in line:
            inside = "for clock" in line
            if inside:
                out.append(line.removeprefix("Info: "))
            continue
        hop = re.match(r"Info:\s+(logic|routing|clk-to-q|setup)\s+([\d.]+)\s+([\d.]+)\s+(Source|Net)\s+(\S+)", line)
        if inside and hop and float(hop[2]) >= 0.2:
            out.append(f"  {hop[1]:8} {hop[2]:>5} {hop[3]:>6} ns  {hop[5][:100]}")
        elif inside and re.match(r"Info: [\d.]+ ns logic", line):
            out.append("  " + line.removeprefix("Info: "))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", choices=sorted(BOARDS), required=True)
    parser.add_argument("--part", choices=("engine", "dram"), required=True)
    parser.add_argument("--seed", type=int, default=1, help="nextpnr's placement seed")
    parser.add_argument("--output", type=Path, help="build folder (default build/<board>-<part>-alone)")
    args = parser.parse_args(argv)
    board = BOARDS[args.board]
    build_dir = build_folder(parser, args.output or ROOT / "build" / f"{board.name}-{args.part}-alone")
    platform = board.platform()
    dram = litedram_core.generate(board.chip, build_dir / "litedram_core.v", phy="board")
    if args.part == "dram":
        platform.add_file("litedram_core.v", (build_dir / "litedram_core.v").read_text())
    os.environ.update(tools_environment())
    try:
        platform.build(PartTop(board, args.part, dram), name=NAME, build_dir=str(build_dir), do_program=False,
                       emit_src=False,
                       nextpnr_opts=f"--seed {args.seed} --report {NAME}-report.json --timing-allow-fail {ROUTER2}")
    except subprocess.CalledProcessError as error:
        print(toolchain_stopped(error, NAME, build_dir), file=sys.stderr)
        return 1
    print(summary(board, read_report(build_dir / f"{NAME}-report.json"), args.seed))
    print("\n".join(slowest_paths((build_dir / f"{NAME}.tim").read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
