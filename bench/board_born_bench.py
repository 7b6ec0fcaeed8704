"""Data born on the board, at host speed: ``netblt send --board --source pattern`` through
the board's functional model (``netblt sim-board --model``) to ``netblt recv`` on loopback.

    python -m netblt.bench.board_born_bench [--size 1G] [--runs 3]   (make bench-board-born)

1. What the board's host spends: CPU seconds per GB and per buffer of the process that
   drives the board (control messages only: the board makes each buffer), on the Versa's
   DRAM geometry (4 MiB slots) and on 16 KiB block-RAM slots, with the host-link bytes
   and datagrams it took; beside it the receiver's CPU and the model's.
2. The same geometry paced at ``--paced-rate``, which the model and the receiver keep up
   with on this machine, with all 16 slots outstanding: the receiver's OKs come at once,
   so the board keeps a deep queue and its host may leave it alone longer (a clean path).
   Then through the model's own WAN of 100 ms round trip and 0.1% loss each way, at that
   pace, its goodput against it.
3. A source that cannot wait, faster than that path: ``--source stamps`` offering more
   than the pace, so the source port refuses words while no slot is free; the words it
   took against those that arrived, and the words the stamps' numbers show missing
   against those the board counted refused.

0. First, what each further GB costs the host: its CPU sending ``--size`` less its CPU
   sending ``--small``, over the bytes between (a connection's own set-up and end cost
   the same in both), on the Versa's geometry.

Every run is checked by the receiver (the pattern byte for byte; the stamps' numbers).
Medians of ``--runs``. On two cores or more the host has core 0 to itself and the model
and the receiver share core 1 (bench/offload_bench.py ``on_core``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..host.units import parse_rate, parse_size, positive
from .offload_bench import HOST, NETBLT, Model, free_port, on_core, report, started

GEOMETRIES = {
    "Versa DRAM, 16 x 4 MiB slots, 9000-byte host link": (["--board", "versa_ecp5", "--slots", "dram", "--mtu", "9000"],
                                                          ["--link-mtu", "9000", "--buffer-size", "4M"]),
    "16 KiB block-RAM slots (2 each way)": ([], []),
}
LONG_PATH = ["--wan-delay", "50ms", "--wan-loss", "0.001"]


@dataclass
class Run:
    mbps: float
    """Data delivered over the receiver's time, from its connection's start to its end
    (every buffer written, every message acknowledged). The sender's own time holds its
    dally too: RFC 998's receiver sends DONE once, and a sender that loses it waits out
    eight of the receiver's control timers (some 3 s here) before it exits, with the data
    already safe."""
    host_cpu: float
    """CPU seconds per GB of the process that drives the board."""
    per_buffer_us: float
    link_bytes: float
    """Host-link bytes per GB of data."""
    link_requests: int
    peer_cpu: float
    model_cpu: float
    buffers: int
    lost: int
    goodput: float
    """:attr:`mbps` against the pace the sender set."""


def send_born(out: Path, size: int, model_args: list[str], send_args: list[str],
              source: str = "pattern") -> tuple[dict, dict, float]:
    """One board-born transfer through a fresh model: the sender's and receiver's reports
    and the model's CPU seconds; SystemExit if it fails."""
    model = Model(*model_args)
    out.mkdir()
    try:
        port = free_port()
        recv = started(NETBLT + ["recv", "--listen", f"127.0.0.1:{port}", "--out", str(out), "--json"], out)
        sender = subprocess.run(NETBLT + ["send", "--source", source, "--size", str(size), f"127.0.0.1:{port}",
                                          "--json", "--board", f"127.0.0.1:{model.link}", "--local-port",
                                          str(model.netblt), *send_args], capture_output=True, text=True, timeout=3600,
                                **on_core(HOST))
        received, _ = recv.communicate(timeout=300)
        model_cpu = model.cpu()
    finally:
        model.close()
    host, peer = report(sender.stdout), report(received)
    if not (host["ok"] and peer["ok"] and peer["data"] == source and peer["bytes"] == size):
        raise SystemExit(f"netblt bench-board-born: a transfer failed: {host['reason']} / {peer['reason']}")
    return host, peer, model_cpu


def send_pattern(out: Path, size: int, model_args: list[str], send_args: list[str]) -> Run:
    host, peer, model_cpu = send_born(out, size, model_args, send_args)
    per_gb = 1e9 / size
    buffers = -(-size // host["buffer_size"])
    pace = host["burst_size"] * host["packet_size"] * 8 / (host["burst_interval_ms"] / 1000)
    return Run(peer["real_mbps"], host["cpu_seconds"] * per_gb, host["cpu_seconds"] / buffers * 1e6,
               host["host_link_bytes"] * per_gb, host["host_link_requests"], peer["cpu_seconds"] * per_gb,
               model_cpu * per_gb, buffers, peer["packets_lost"], peer["real_mbps"] * 1e6 / pace)


def median_run(runs: list[Run]) -> Run:
    """Each figure's median over the runs."""
    return Run(*(statistics.median(getattr(r, name) for r in runs) for name in Run.__dataclass_fields__))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netblt bench-board-born", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=1 << 30, help="bytes per transfer (default: 1G)")
    parser.add_argument("--small", type=parse_size, default=128 << 20,
                        help="the smaller transfer the marginal cost is taken against (default: 128M)")
    parser.add_argument("--runs", type=positive, default=3, help="runs per case, for medians (default: 3)")
    parser.add_argument("--paced-rate", type=parse_rate, default=300e6, metavar="RATE",
                        help="the sender's pace in the paced case and through the long path (default: 300M, "
                             "which the model and the receiver keep up with on 2 cores)")
    args = parser.parse_args(argv)
    console = Console(width=150)
    cases = dict(GEOMETRIES)
    versa_model, versa_send = GEOMETRIES[next(iter(GEOMETRIES))]
    paced = ["--rate", str(int(args.paced_rate))]
    cases[f"Versa DRAM, all 16 slots outstanding, paced at {args.paced_rate / 1e6:g} Mb/s"] = (
        versa_model, versa_send + paced + ["--buffers", "16"])
    cases[f"Versa DRAM through 100 ms and 0.1% loss, paced at {args.paced_rate / 1e6:g} Mb/s"] = (
        versa_model + LONG_PATH, versa_send + paced)
    results = {}
    with tempfile.TemporaryDirectory() as directory:
        marginal = []
        for attempt in range(args.runs):
            console.print(f"[dim]each further GB: run {attempt + 1} of {args.runs} ...[/]")
            cpu = [send_born(Path(directory) / f"marginal{attempt}-{size}", size, versa_model, versa_send)[0]
                   ["cpu_seconds"] for size in (args.small, args.size)]
            marginal.append((cpu[1] - cpu[0]) / (args.size - args.small) * 1e9)
        for number, (name, (model_args, send_args)) in enumerate(cases.items()):
            runs = []
            for attempt in range(args.runs):
                console.print(f"[dim]{name}: run {attempt + 1} of {args.runs} ...[/]")
                runs.append(send_pattern(Path(directory) / f"out{number}-{attempt}", args.size, model_args, send_args))
            results[name] = median_run(runs)
        console.print("[dim]stamps faster than the long path ...[/]")
        stamps = send_stamps(Path(directory) / "stamps", args, versa_model + LONG_PATH, versa_send)
    console.print(f"Each further GB ({args.small / 2**20:g} MiB -> {args.size / 2**20:g} MiB), Versa DRAM geometry: "
                  f"{statistics.median(marginal):.3f} host CPU seconds (runs: {', '.join(f'{m:.3f}' for m in marginal)})")
    print_table(console, results, args)
    print_stamps(console, stamps)
    return 0


def send_stamps(out: Path, args: argparse.Namespace, model_args: list[str], send_args: list[str]) -> dict:
    """Stamps offered at twice the pace through the long path: what the board took and
    refused, what arrived, and what the stamps' numbers show missing."""
    rate = args.paced_rate
    host, peer, _ = send_born(out, args.size, model_args, send_args + ["--rate", str(int(rate)), "--stamp-rate",
                                                                       str(int(2 * rate))], source="stamps")
    data = (out / "stamps").read_bytes()
    last = int.from_bytes(data[-4:], "little")
    return {"stamp rate": 2 * rate, "taken (board)": host["source_taken"], "arrived": len(data) // 4,
            "refused (board, to the end)": host["source_refused"], "missing (receiver)": peer["stamps_missing"],
            "offered up to the last that arrived, less those that arrived": last + 1 - len(data) // 4,
            "seconds": host["seconds"]}


def print_stamps(console: Console, stamps: dict) -> None:
    table = Table(title=f"The stamp source at {stamps['stamp rate'] / 1e6:g} Mb/s through the long path: words")
    for column in stamps:
        if column != "stamp rate":
            table.add_column(column, justify="right")
    table.add_row(*(f"{v:,}" if isinstance(v, int) else f"{v:.1f}" for k, v in stamps.items() if k != "stamp rate"))
    console.print(table)
    console.print(json.dumps(stamps))


def print_table(console: Console, results: dict[str, Run], args: argparse.Namespace) -> None:
    table = Table(title=f"Board-born data through the model, {args.size / 2**30:g} GiB, medians of {args.runs}: "
                        f"the host drives control only")
    for column in ("case", "Mb/s", "of the pace", "host CPU s/GB", "host CPU a buffer (us)", "buffers",
                   "host link KB/GB", "requests", "receiver CPU s/GB", "model CPU s/GB", "lost"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for name, r in results.items():
        table.add_row(name, f"{r.mbps:.0f}", f"{r.goodput:.0%}", f"{r.host_cpu:.3f}", f"{r.per_buffer_us:.0f}",
                      str(r.buffers), f"{r.link_bytes / 1000:.0f}", f"{r.link_requests:.0f}", f"{r.peer_cpu:.2f}",
                      f"{r.model_cpu:.2f}", f"{r.lost:.0f}")
    console.print(table)
    console.print(json.dumps({name: vars(r) for name, r in results.items()}))


if __name__ == "__main__":
    sys.exit(main())
