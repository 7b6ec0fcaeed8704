"""What the offload costs its host, at host speed: transfers through the board's
functional model (``netblt sim-board --model``) beside the software path, in one run.

    python -m netblt.bench.offload_bench [--size 1G]       (make bench-offload)

1. Offloaded send: ``netblt send --board`` through the model to ``netblt recv`` on
   loopback; offloaded receive: ``netblt send`` to ``netblt recv --board``; each on the
   Versa's DRAM geometry with the host link's defaults (the model's wire at 1500 bytes,
   and at 9000, which the host then finds and uses), and on the Colorlight's block RAM.
   Beside them the software path, same size.
2. Per process, its CPU seconds per GB: the host that drives the board, its software
   peer, and the model (which stands for the board: not the host's cost).
3. The host link's uploads with a 200 us round trip between host and board (the
   model's ``--link-delay 100us``), 1500-byte datagrams, against the wire.
4. The host link alone, 1 MiB at a time through the compiled bulk path to a responder
   that answers at once (its own process), against the floor: the same bytes through
   one socket with nothing else (bench/board_bench.py's two), at 1500 and 9000 bytes.

Every transfer is checked byte-exact. On a machine of two cores or more the process
measured (the host driving the board, or the software sender) has core 0 to itself and
the model and its peer share core 1: what shares a core decides a process's CPU figure.
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
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..driver.link import BoardLink
from ..formats import host_link as F
from ..host.units import parse_size, positive
from .board_bench import kernel_floor, link_speed

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
CASES = (("versa_ecp5", "dram", 1500), ("versa_ecp5", "dram", 9000), ("colorlight_5a75b", "block", 1500))
"""Each board's geometry, and the largest datagram its model's wire carries: the host finds it."""
HOST, HELPERS = 0, 1
"""The cores: the process measured, and the model and the peer."""
UPLOAD_BYTES = 64 << 20


@dataclass
class Run:
    what: str
    mbps: float
    host_cpu: float
    """Seconds per GB of the process driving the board (or the software sender/receiver)."""
    peer_cpu: float
    model_cpu: float
    buffers: int
    size: int
    lost: int
    unposted: int


def on_core(core: int) -> dict:
    """Popen's options that run a process on ``core`` alone, where the machine has two or more."""
    if len(os.sched_getaffinity(0)) < 2:
        return {}
    return {"preexec_fn": lambda: os.sched_setaffinity(0, {core})}


class Model:
    """``netblt sim-board --model`` in the background (on the helpers' core), its CPU read
    from /proc."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(NETBLT + ["sim-board", "--model", *args], stdout=subprocess.PIPE, text=True,
                                     **on_core(HELPERS))
        self.link = int(self.proc.stdout.readline().split(":")[-1])
        self.netblt = int(self.proc.stdout.readline().split(":")[1].split()[0])

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=30)


def started(args: list[str], cwd: Path, core: int = HELPERS, env: dict[str, str] | None = None) -> subprocess.Popen:
    proc = subprocess.Popen(args, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                            **on_core(core))
    while "waiting for a sender" not in (line := proc.stderr.readline()):
        if not line:
            raise SystemExit(f"netblt bench-offload: {' '.join(args[3:])} did not start: {proc.stderr.read()}")
    return proc


def report(stdout: str) -> dict:
    return json.loads(next(line for line in stdout.splitlines() if line.startswith("{")))


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exchange(source: Path, out: Path, way: str, model: Model | None, link_mtu: int = 1500,
             host: list[str] = NETBLT, env: dict[str, str] | None = None,
             sender_args: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """One file ``way`` ("send": the host measured sends; "recv": it receives) through
    ``model`` (its wire at ``link_mtu`` bytes), or on the software path (None): the host
    measured runs the CLI as ``host`` (with ``env``) on a core of its own, its peer beside
    the model; the sender is given ``sender_args``. The host's report and its peer's, the
    file checked whole."""
    out.mkdir()
    # The wire's MTU where it is not Ethernet's (a host finds it alone, but not an older one).
    on_board = ["--board", f"127.0.0.1:{model.link}"] + (["--link-mtu", str(link_mtu)] if link_mtu != 1500
                                                           else []) if model else []
    if way == "send":
        port = free_port()
        recv = started(NETBLT + ["recv", "--listen", f"127.0.0.1:{port}", "--out", str(out), "--json"], out)
        local = ["--local-port", str(model.netblt)] if model else []
        sender = subprocess.run(host + ["send", str(source), f"127.0.0.1:{port}", "--json", *on_board, *local,
                                        *sender_args], capture_output=True, text=True, timeout=3600, env=env,
                                **on_core(HOST))
        received, _ = recv.communicate(timeout=120)
        host_report, peer_report = report(sender.stdout), report(received)
    else:
        port = model.netblt if model else free_port()
        recv = started(host + ["recv", "--listen", f"127.0.0.1:{port}", "--out", str(out), "--json", *on_board],
                       out, core=HOST, env=env)
        sender = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{port}", "--json", *sender_args],
                                capture_output=True, text=True, timeout=3600, **on_core(HELPERS))
        received, _ = recv.communicate(timeout=120)
        host_report, peer_report = report(received), report(sender.stdout)
    if not (host_report["ok"] and peer_report["ok"]) or (out / source.name).stat().st_size != source.stat().st_size:
        raise SystemExit(f"netblt bench: a transfer failed: {host_report['reason']} / {peer_report['reason']}")
    return host_report, peer_report


def transfer(source: Path, out: Path, way: str, board: tuple[str, str, int] | None) -> Run:
    """One file ``way`` through the model of ``board``, or on the software path (None)."""
    model = Model("--board", board[0], "--slots", board[1], "--mtu", str(board[2])) if board else None
    try:
        host, peer = exchange(source, out, way, model, board[2] if board else 1500)
        model_cpu = model.cpu() if model else 0.0
    finally:
        if model:
            model.close()
    per_gb = 1e9 / source.stat().st_size
    what = f"{board[0]} {board[1]}, wire {board[2]}" if board else "software path"
    unposted = sum(v for k, v in host["dropped"].items() if "no posted receive slot" in k)
    return Run(what, host["real_mbps"], host["cpu_seconds"] * per_gb, peer["cpu_seconds"] * per_gb,
               model_cpu * per_gb, -(-source.stat().st_size // host["buffer_size"]), source.stat().st_size,
               host["packets_lost"], unposted)


def median(runs: list[Run]) -> Run:
    """Each figure's median over the runs."""
    first = runs[0]
    return replace(first, **{name: statistics.median(getattr(r, name) for r in runs)
                             for name in ("mbps", "host_cpu", "peer_cpu", "model_cpu", "lost", "unposted")})


def uploads_with_delay(delay: str, mtu: int) -> float:
    """Mb/s of 1 MiB uploads, each through the compiled bulk path as the board data path
    uploads a slot, to the model with ``delay`` each way between host and board."""
    model = Model("--link-delay", delay, "--board", "versa_ecp5", "--slots", "dram")
    link = BoardLink(("127.0.0.1", model.link), mtu=mtu)
    try:
        link.open()
        data = os.urandom(1 << 20)
        wall = time.monotonic()
        for at in range(UPLOAD_BYTES // len(data)):
            link.upload(0, data)
        return UPLOAD_BYTES * 8 / (time.monotonic() - wall) / 1e6
    finally:
        link.close()
        model.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netblt bench-offload", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=1 << 30, help="bytes per transfer (default: 1G)")
    parser.add_argument("--runs", type=positive, default=3, help="runs of each transfer, for medians (default: 3)")
    args = parser.parse_args(argv)
    console = Console(width=140)
    cases = [(way, board) for board in (None, *CASES) for way in ("send", "recv")]
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        source = tmp / "data.bin"
        with open(source, "wb") as f:
            for at in range(0, args.size, 1 << 24):
                f.write(os.urandom(min(1 << 24, args.size - at)))
        each: dict[tuple[str, tuple[str, str, int] | None], list[Run]] = {case: [] for case in cases}
        for attempt in range(args.runs):  # each run goes through every case: a slow spell hits them alike
            for number, (way, board) in enumerate(cases):
                console.print(f"[dim]run {attempt + 1} of {args.runs}: {way} {board or 'software'} ...[/]")
                each[way, board].append(transfer(source, tmp / f"out{attempt}-{number}", way, board))
    runs = {case: median(found) for case, found in each.items()}
    uploads = {delay: uploads_with_delay(delay, 1500) for delay in ("0us", "100us")}
    console.print("[dim]the host link against the floor ...[/]")
    floor = {mtu: link_speed(mtu, 1 << 20) | {"floor": kernel_floor(mtu)} for mtu in (1500, 9000)}
    print_tables(console, runs, each, uploads, floor, args.runs)
    return 0


def print_tables(console: Console, runs: dict, each: dict, uploads: dict[str, float], floor: dict[int, dict],
                 count: int) -> None:
    table = Table(title=f"Through the board's model at host speed, CPU seconds per GB by process, medians of "
                        f"{count}; the host measured on a core of its own")
    for column in ("transfer", "Mb/s", "host", "against the software path's (each run)", "its peer",
                   "the model (the board)", "buffers", "host CPU a buffer (us)", "lost", "unposted"):
        table.add_column(column, justify="left" if column == "transfer" else "right")
    for (way, board), run in runs.items():
        name = (f"board {'sends' if way == 'send' else 'receives'}: {run.what}" if board else
                f"software {'send' if way == 'send' else 'recv'} (the host measured)")
        # Each run's ratio against the software path of the same round: the two met the same machine.
        ratios = [r.host_cpu / s.host_cpu for r, s in zip(each[way, board], each[way, None])]
        table.add_row(name, f"{run.mbps:.0f}", f"{run.host_cpu:.2f}",
                      f"{statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)})",
                      f"{run.peer_cpu:.2f}", f"{run.model_cpu:.2f}" if board else "", str(run.buffers),
                      f"{run.host_cpu * run.size / 1e9 / run.buffers * 1e6:.0f}", f"{run.lost:.0f}",
                      f"{run.unposted:.0f}")
    console.print(table)
    console.print(json.dumps({f"{way} {board}": vars(run) for (way, board), run in runs.items()}))
    allowed = F.WINDOW * 4 * F.max_words(1500) * 8 / (200e-6 + 2 * 1538 * 8 / 1e9) / 1e6
    console.print(f"uploads, 1500-byte datagrams: {uploads['100us']:.0f} Mb/s with a 200 us round trip to the "
                  f"board, {uploads['0us']:.0f} Mb/s without (the window of {F.WINDOW} allows {allowed:.0f})")
    table = Table(title="The host link alone, 1 MiB at a time, host CPU seconds per GB against the floor")
    for column in ("datagrams", "upload", "download", "the floor (one socket, nothing else)", "upload / floor",
                   "download / floor"):
        table.add_column(column, justify="right")
    for mtu, f in floor.items():
        table.add_row(f"{mtu} bytes", f"{f['upload'][1]:.2f}", f"{f['download'][1]:.2f}", f"{f['floor']:.2f}",
                      f"{f['upload'][1] / f['floor']:.2f}", f"{f['download'][1] / f['floor']:.2f}")
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
