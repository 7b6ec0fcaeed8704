"""The Ethernet benchmark: the integrated top on GMII, and the boards' bitstreams.

    python -m netblt.sim.ethernet_bench            (make bench-ethernet)

Runs sim/ethernet_bench_tb.py under Verilator: unpaced transmission timed at the GMII
wires against the gigabit goodput for each frame size, and DATA frames received back to
back at the minimum gap. Then builds each board's bitstream (hw/build.py) for its Fmax
and utilisation, unless --no-boards. Prints tables; docs/benchmarks.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from netblt.gateware.config import EngineConfig
from netblt.hw import build, liteeth_core
from netblt.hw.boards import BOARDS
from netblt.hw.node import NetbltNode

from . import hdl

MODULE = "netblt.sim.ethernet_bench_tb"
CASES = "1456:ip,1448:udp,532:ip,524:udp,64:ip,64:udp"
"""A 1500-byte MTU, a 576-byte one, and 64-byte payloads, each native and in UDP."""


def simulate(results: Path, cases: str) -> dict:
    runner = hdl.build(NetbltNode(EngineConfig()), "top", [liteeth_core.simulation_core(hdl.BUILD / "liteeth")])
    env = {"NETBLT_BENCH_RESULTS": str(results), "NETBLT_BENCH_CASES": cases}
    for case in ("bench_transmit", "bench_receive"):
        hdl.run(runner, "top", MODULE, Path(__file__).parent, testcase=case, env=env)
    return json.loads(results.read_text())


def report(results: dict, console: Console) -> None:
    table = Table(title="Transmit, unpaced, at the GMII wires (gigabit Ethernet)")
    for column in ("payload B", "carriage", "frames timed", "wire B/frame", "median gap ns",
                   "goodput Mb/s", "theoretical Mb/s", "of theoretical"):
        table.add_column(column, justify="right")
    for row in results["transmit"]:
        table.add_row(str(row["payload"]), "UDP" if row["udp"] else "IP 30", str(row["frames"]),
                      str(row["wire_bytes"]), f"{row['median_interval_ns']:.0f}", f"{row['goodput_mbps']:.1f}",
                      f"{row['theoretical_mbps']:.1f}", f"{row['goodput_mbps'] / row['theoretical_mbps']:.2%}")
    console.print(table)
    table = Table(title="Receive: DATA frames back to back at the minimum gap")
    for column in ("payload B", "carriage", "gap B", "frames", "accepted", "drops"):
        table.add_column(column, justify="right")
    for row in results["receive"]:
        drops = ", ".join(f"{k}={v}" for k, v in row["drops"].items()) or "0"
        table.add_row(str(row["payload"]), "UDP" if row["udp"] else "IP 30", str(row["gap_bytes"]),
                      str(row["frames"]), str(row["accepted"]), drops)
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES, help="payload:ip|udp, comma-separated")
    parser.add_argument("--no-boards", action="store_true", help="skip the bitstream builds")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console.width = 160
    with tempfile.TemporaryDirectory() as tmp:
        report(simulate(Path(tmp) / "bench.json", args.cases), console)
    if not args.no_boards:
        for board in BOARDS.values():
            placed = build.build(board, liteeth_core.parse_mac(liteeth_core.MAC_ADDRESS), liteeth_core.IP_ADDRESS,
                                 build.MANAGEMENT_PORT, build.ROOT / "build" / board.name)
            console.print(build.summary(board, placed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
