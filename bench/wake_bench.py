"""What a wake costs this machine: the CPU of the same piece of a sending host's work (the
peer's CONTROL packet of nine OKs decoded, as a board pushes it), done back to back and
done once after each sleep of 1, 10 and 50 ms.

    python -m netblt.bench.wake_bench [--turns 200]

A host that leaves its board alone between buffers (driver/board.py ``unattended``) does
its work after such sleeps; on a VM, whose idle virtual CPU gives up the real one and its
caches, that costs several times the work itself. Medians of ``--turns``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from rich.console import Console
from rich.table import Table

from ..host.units import positive
from ..protocol.codec import decode, encode
from ..protocol.packets import Control, Ok

SLEEPS = (0.0, 0.001, 0.01, 0.05)
CONTROL = encode(Control(tuple(Ok(seq, seq, 77, 1, 100) for seq in range(1, 10))), 2000, 2001)


def turn_cpu(sleep: float) -> float:
    """CPU seconds of one turn of the work after ``sleep`` seconds asleep."""
    if sleep:
        time.sleep(sleep)
    started = time.process_time()
    decode(CONTROL)
    return time.process_time() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netblt bench-wake", description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=positive, default=200, help="turns per sleep, for medians (default: 200)")
    args = parser.parse_args(argv)
    medians = {sleep: statistics.median(turn_cpu(sleep) for _ in range(args.turns)) for sleep in SLEEPS}
    table = Table(title="CPU of one turn: a CONTROL packet of nine OKs decoded")
    for column in ("asleep before it", "CPU (us, median)", "against back to back"):
        table.add_column(column, justify="right")
    for sleep, cpu in medians.items():
        table.add_row(f"{sleep * 1000:g} ms" if sleep else "back to back", f"{cpu * 1e6:.0f}",
                      f"{cpu / medians[0.0]:.1f} x")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
