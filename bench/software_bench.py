"""``make bench``: the software path's figures, printed as a table (docs/benchmarks.md).

Each loopback case runs ``netblt recv`` and ``netblt send`` as separate processes (and
``netblt netem`` between them where named), repeats it, and prints the median goodput,
the sending command's wall-clock rate (start-up and hashing included) and the receiving
process's CPU use. The last case reproduces RFC 1030's Wideband
satellite setting in the virtual-time emulator.

``make bench-rates`` (``--rates``): how closely each end's steady-state rate matches a
rate requested at the sender (``send --rate``) or capped at the receiver (``recv --rate``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..protocol.params import Params
from ..sim.wan.netem import PathConfig
from ..sim.wan.virtual import simulate

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
LINE_RATE = "1G"
"""The software path's cases run at gigabit line rate: loopback itself has no limit."""


def loopback(source: Path, out: Path, packet_size: int, loss: float, port: int, rate: str | None = LINE_RATE) -> dict:
    """One transfer at ``rate`` (None: no ``--rate``, the rate selected as it goes); returns
    the receiver's report, with the sending process's wall-clock time added."""
    recv_port = port
    recv = subprocess.Popen(NETBLT + ["recv", "--listen", f"127.0.0.1:{recv_port}", "--out", str(out),
                                      "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recv.stderr.readline()
    target, relay = recv_port, None
    if loss:
        target = port + 1
        relay = subprocess.Popen(NETBLT + ["netem", "--listen", f"127.0.0.1:{target}", "--forward",
                                           f"127.0.0.1:{recv_port}", "--loss", str(loss), "--duration", "600s"],
                                 stdout=subprocess.PIPE, text=True)
        relay.stdout.readline()
    try:
        started = time.monotonic()
        sent = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{target}", "--json",
                                        "--packet-size", str(packet_size), *(["--rate", rate] if rate else [])],
                              capture_output=True, text=True)
        wall = time.monotonic() - started
        stdout, _ = recv.communicate(timeout=600)
    finally:
        if relay:
            relay.terminate()
            relay.wait()
    report = json.loads(stdout)
    if sent.returncode or not report["ok"]:
        raise RuntimeError(f"transfer failed: {sent.stderr.strip()} / {report['reason']}")
    (out / source.name).unlink()
    report["sender_wall_mbps"] = report["bytes"] * 8 / wall / 1e6
    return report


RATES = [("1M", 1e6), ("10M", 10e6), ("100M", 100e6), ("500M", 500e6), ("default", 950e6)]
RATE_SECONDS = 6.0
"""Each rate case moves this many seconds' worth of data, in 20 buffers."""


def rated(tmp: Path, where: str, requested: str, rate: float, port: int) -> tuple[dict, dict]:
    """One transfer with the rate set at ``where`` (send or recv); both ends' reports."""
    size = int(rate / 8 * RATE_SECONDS)
    source = tmp / f"rate-{requested}.bin"
    if not source.exists():
        with open(source, "wb") as f:
            f.write(os.urandom(size))
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    flag = [] if requested == "default" else ["--rate", requested]
    recv = subprocess.Popen(NETBLT + ["recv", "--listen", f"127.0.0.1:{port}", "--out", str(out), "--json",
                                      *(flag if where == "recv" else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recv.stderr.readline()
    sent = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{port}", "--json", "--buffer-size",
                                    str(max(1448, size // 20)), *(flag if where == "send" else [])],
                          capture_output=True, text=True)
    stdout, _ = recv.communicate(timeout=600)
    (out / source.name).unlink(missing_ok=True)
    if sent.returncode:
        raise RuntimeError(f"transfer failed: {sent.stderr.strip()}")
    return json.loads(sent.stdout), json.loads(stdout)


def rates(runs: int, console: Console) -> None:
    table = Table(title=f"netblt rates on loopback, {RATE_SECONDS:.0f} s of data in 20 buffers, median of {runs}")
    for column in ("rate set at", "requested", "negotiated", "BS/BI", "sender steady", "receiver steady",
                   "sender / requested", "receiver / requested"):
        table.add_column(column, justify="right", no_wrap=True)
    with tempfile.TemporaryDirectory(prefix="netblt-bench-") as tmp:
        for where in ("send", "recv"):
            for requested, rate in RATES:
                if where == "recv" and requested == "default":
                    continue  # a receiver without --rate caps nothing: the sender's default row
                pairs = [rated(Path(tmp), where, requested, rate, 32000 + 10 * i) for i in range(runs)]
                s = statistics.median(p[0]["steady_state_mbps"] for p in pairs)
                r = statistics.median(p[1]["steady_state_mbps"] for p in pairs)
                first = pairs[0][0]
                negotiated = first["burst_size"] * first["packet_size"] * 8 / first["burst_interval_ms"] / 1e3
                table.add_row(f"{where} --rate", requested, f"{negotiated:.2f} Mb/s",
                              f"{first['burst_size']}/{first['burst_interval_ms']}", f"{s:.2f} Mb/s",
                              f"{r:.2f} Mb/s", f"{100 * s / (rate / 1e6):.1f}%", f"{100 * r / (rate / 1e6):.1f}%")
                console.print(f"  measured: {where} --rate {requested}", style="dim")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=1 << 30, help="bytes per loopback transfer (1 GiB)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rates", action="store_true", help="the rate table instead (make bench-rates)")
    args = parser.parse_args(argv)
    console = Console(width=200)
    if args.rates:
        rates(args.runs, console)
        return 0
    table = Table(title=f"netblt software path, {args.size >> 20} MiB per transfer, median of {args.runs}")
    for column in ("case", "payload", "rate", "goodput (steady)", "goodput (real)", "sender wall clock",
                   "receiver CPU", "of which data path", "#RXM", "note"):
        table.add_column(column, justify="right", no_wrap=True)
    cases = [("loopback", 1448, 0.0, LINE_RATE), ("loopback", 8948, 0.0, LINE_RATE),
             ("relay, 1% loss", 1448, 0.01, LINE_RATE), ("relay, 1% loss", 8948, 0.01, LINE_RATE),
             ("loopback", 1448, 0.0, None)]
    with tempfile.TemporaryDirectory(prefix="netblt-bench-") as tmp:
        source = Path(tmp) / "bench.bin"
        with open(source, "wb") as f:
            for _ in range(args.size >> 20):
                f.write(os.urandom(1 << 20))
        out = Path(tmp) / "out"
        out.mkdir()
        baseline: dict[int, float] = {}
        for case, packet_size, loss, rate in cases:
            runs = [loopback(source, out, packet_size, loss, 31000 + 10 * i, rate) for i in range(args.runs)]
            steady, real, wall, cpu, dp_cpu, rxm = (statistics.median(figure(r) for r in runs) for figure in (
                lambda r: r["steady_state_mbps"], lambda r: r["real_mbps"], lambda r: r["sender_wall_mbps"],
                lambda r: r["cpu_seconds"] / r["seconds"], lambda r: r["datapath_cpu_seconds"] / r["seconds"],
                lambda r: r["packets_retransmitted"]))
            note = ""
            if loss:
                note = f"{100 * real / baseline[packet_size]:.0f}% of loss-free"
            elif rate:
                baseline[packet_size] = real
            table.add_row(case, f"{packet_size} B", rate or "none (selected)", f"{steady:.0f} Mb/s",
                          f"{real:.0f} Mb/s", f"{wall:.0f} Mb/s", f"{cpu:.2f} core", f"{dp_cpu:.2f} core",
                          f"{rxm:.0f}", note)
            console.print(f"  measured: {case}, {packet_size} B payloads, rate {rate or 'selected'}", style="dim")
    wideband = Params(buffer_size=14320, packet_size=1432, burst_size=5, burst_interval=55, max_buffers=22,
                      data_checksum=True, death_timer=60)
    data = os.urandom(716 * 1000)
    speeds = []
    for seed in range(5):
        result = simulate(data, wideband, seed=seed,
                          forward=PathConfig(delay=0.9, jitter=0.02, loss=0.01, rate_bps=1.05e6, queue_bytes=64_000),
                          backward=PathConfig(delay=0.9, jitter=0.02))
        speeds.append(result.receiver.progress.steady_state_bps() / 1e6)
    table.add_row("Wideband (virtual)", "1432 B", "5 per 55 ms", f"{statistics.median(speeds):.3f} Mb/s", "", "", "",
                  "", "", "RFC 1030: 0.926-0.942")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
