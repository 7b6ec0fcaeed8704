"""Where a small buffer's host CPU goes: the protocol core's turn, the file's read or
write, and the rest (the data path and the run loop), for 16 KiB buffers through the
Colorlight block-RAM model and on the software path, each way.

    python -m netblt.bench.turn_split [--size 64M] [--runs 3]       (make bench-turn)

The host measured runs on a core of its own, the model and its peer on the other (as in
``make bench-offload``, whose helpers these are). Inside it, each call of the protocol core
(``Connection``: the sans-IO state machine both data paths share) and of the file's
reads or writes is timed in thread CPU; a call's timing costs about a microsecond, which
the whole figure includes. The issue's goal for such buffers (docs/benchmarks.md: 100 us
sending, 130 receiving) is set beside the figures: a part that alone takes most of it
says what any data path below it can still leave out.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..host.units import parse_size, positive
from .offload_bench import Model, exchange

BUFFER = 16384
"""The Colorlight block-RAM build's slot: the buffers its host moves one turn each."""
BOARD = ("colorlight_5a75b", "block")
GOALS = {"send": 100.0, "recv": 130.0}
"""Host CPU a 16 KiB buffer, us: the issue's goals (line rate at a gigabit is 131)."""
PARTS = ("core", "file")
SPLIT = "NETBLT_BENCH_SPLIT"
"""Where the measured process writes its split (JSON), named in its environment."""
MEASURED = [sys.executable, "-m", "netblt.bench.turn_split", "--measure", "--"]
"""``netblt`` with its turn split (:func:`run_measured`)."""


def run_measured(cli: list[str]) -> int:
    """Run the CLI in this process with its core and file calls timed; the sums go to
    the file :data:`SPLIT` names when it exits."""
    from ..host import cli as netblt
    from ..host.files import FileSink, FileSource
    from ..protocol.connection import Connection

    spent = dict.fromkeys(PARTS, 0.0)

    def timed(owner: type, name: str, part: str) -> None:
        call: Callable[..., Any] = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return call(*args, **kwargs)
            finally:
                spent[part] += time.thread_time() - start
        setattr(owner, name, wrapper)

    for name in ("handle", "handle_timeout"):
        timed(Connection, name, "core")
    timed(FileSink, "write", "file")
    timed(FileSource, "buffer", "file")
    atexit.register(lambda: Path(os.environ[SPLIT]).write_text(json.dumps(spent)))
    return netblt.main(cli)


def transfer(source: Path, out: Path, way: str, board: bool) -> dict[str, float]:
    """One file ``way`` ("send" or "recv" for the host measured) in 16 KiB buffers, through
    the model or on the software path: the host's CPU a buffer, whole and by part (us)."""
    model = Model("--board", BOARD[0], "--slots", BOARD[1]) if board else None
    split_file = out.with_suffix(".split")
    try:
        host, _ = exchange(source, out, way, model, host=MEASURED, env=os.environ | {SPLIT: str(split_file)},
                           sender_args=() if board else ("--buffer-size", str(BUFFER)))  # a board's follows its slots
    finally:
        if model:
            model.close()
    if host["buffer_size"] != BUFFER:
        raise SystemExit(f"netblt bench-turn: {host['buffer_size']}-byte buffers, not {BUFFER}")
    buffers = -(-source.stat().st_size // BUFFER)
    us = {part: 1e6 * seconds / buffers for part, seconds in json.loads(split_file.read_text()).items()}
    whole = 1e6 * host["cpu_seconds"] / buffers
    return {"whole": whole, **us, "rest": whole - sum(us.values()), "mbps": host["real_mbps"]}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["--measure", "--"]:
        return run_measured(argv[2:])
    parser = argparse.ArgumentParser(prog="netblt bench-turn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=64 << 20, help="bytes per transfer (default: 64M)")
    parser.add_argument("--runs", type=positive, default=3, help="runs of each transfer, for medians (default: 3)")
    args = parser.parse_args(argv)
    console = Console(width=140)
    cases = [(way, board) for way in ("send", "recv") for board in (True, False)]
    each: dict[tuple[str, bool], list[dict[str, float]]] = {case: [] for case in cases}
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        source = tmp / "data.bin"
        source.write_bytes(os.urandom(args.size))
        for attempt in range(args.runs):  # each run goes through every case: a slow spell hits them alike
            for number, (way, board) in enumerate(cases):
                console.print(f"[dim]run {attempt + 1} of {args.runs}: {way}, "
                              f"{'the board' if board else 'the software path'} ...[/]")
                each[way, board].append(transfer(source, tmp / f"out{attempt}-{number}", way, board))
    table = Table(title=f"Host CPU a {BUFFER // 1024} KiB buffer (us), medians of {args.runs}; the host measured on "
                        "a core of its own")
    for column in ("the host", "Mb/s", "whole", "protocol core", "file", "the rest: data path, run loop", "goal"):
        table.add_column(column, justify="left" if column == "the host" else "right")
    for (way, board), runs in each.items():
        mid = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        where = f"{BOARD[0]} {BOARD[1]} RAM (model)" if board else "software path"
        name = f"{'sends' if way == 'send' else 'receives'}: {where}"
        table.add_row(name, f"{mid['mbps']:.0f}", f"{mid['whole']:.0f}", f"{mid['core']:.0f}", f"{mid['file']:.0f}",
                      f"{mid['rest']:.0f}", f"{GOALS[way]:.0f}" if board else "")
    console.print(table)
    console.print(json.dumps({f"{way} {'board' if board else 'software'}": runs
                              for (way, board), runs in each.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
