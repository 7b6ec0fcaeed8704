"""How much slower than a board ``netblt sim-board`` runs: idle, and while a file goes
through it, for the tests' design in block RAM and the Versa's with its slots in DRAM.

    python -m netblt.bench.sim_speed_bench [--runs 3] [--size 4M]    (make bench-sim)

The board's own CYCLES register, read over its host link (a STATUS needs no session,
so it disturbs nothing) before and after, against the wall clock between: simulated
seconds are cycles over the engine's clock. "With traffic" is ``netblt send --board``
of a file to a software ``netblt recv`` on loopback, start to end. Medians of the runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..driver.link import BoardLink
from ..host.units import parse_size
from .offload_bench import NETBLT, free_port

DESIGNS = (("tests' design, block RAM", []), ("Versa, slots in DRAM", ["--board", "versa_ecp5", "--slots", "dram"]))
IDLE_SECONDS = 10.0


def board_clock(link: tuple[str, int]) -> tuple[float, int, int]:
    """(wall seconds, CYCLES, the engine's clock in Hz) of the board at ``link``, now."""
    board = BoardLink(link)
    try:
        registers = board.status()
    finally:
        board.close()
    return time.monotonic(), registers["CYCLES"], registers["CLOCK_HZ"]


def slowdown(before: tuple[float, int, int], after: tuple[float, int, int]) -> float:
    simulated = ((after[1] - before[1]) & 0xFFFF_FFFF) / before[2]
    return (after[0] - before[0]) / simulated


def one_run(options: list[str], size: int, folder: Path) -> tuple[float, float]:
    """(idle, with traffic) times slower than real time, on one sim-board."""
    netblt = free_port()
    board = subprocess.Popen(NETBLT + ["sim-board", "--netblt-port", str(netblt), *options],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = ""
        while not line.startswith("management"):
            line = board.stdout.readline()
            if not line:
                raise SystemExit(f"sim-board ended before it served: {board.wait()}")
        link = ("127.0.0.1", int(line.rsplit(":", 1)[1]))
        time.sleep(2)  # past its start
        first = board_clock(link)
        time.sleep(IDLE_SECONDS)
        idle = slowdown(first, board_clock(link))
        data = folder / "data.bin"
        data.write_bytes(os.urandom(size))
        port = free_port()
        receiver = subprocess.Popen(NETBLT + ["recv", "--listen", f"127.0.0.1:{port}", "--out", str(folder / "in"),
                                              "--death-timer", "120"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        time.sleep(1)
        start = board_clock(link)
        subprocess.run(NETBLT + ["send", str(data), f"127.0.0.1:{port}", "--board", f"{link[0]}:{link[1]}",
                                 "--local-port", str(netblt), "--death-timer", "120"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)
        busy = slowdown(start, board_clock(link))
        receiver.wait(timeout=60)
        return idle, busy
    finally:
        board.send_signal(signal.SIGINT)
        board.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netblt.bench.sim_speed_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", type=parse_size, default=parse_size("4M"), help="the file sent (default 4M)")
    args = parser.parse_args(argv)
    table = Table(title=f"netblt sim-board, times slower than real time (median of {args.runs})")
    for column in ("design", "idle", "with traffic", "runs (idle / traffic)"):
        table.add_column(column, justify="left" if column == "design" else "right")
    for name, options in DESIGNS:
        runs = []
        for run in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                runs.append(one_run(options, args.size, Path(folder)))
            print(f"{name}, run {run + 1}: idle 1:{runs[-1][0]:,.0f}, with traffic 1:{runs[-1][1]:,.0f}",
                  file=sys.stderr, flush=True)
        idle, busy = (statistics.median(r[i] for r in runs) for i in (0, 1))
        table.add_row(name, f"{idle:,.0f}", f"{busy:,.0f}", ", ".join(f"{a:,.0f}/{b:,.0f}" for a, b in runs))
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
