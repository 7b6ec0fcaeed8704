"""What the offload costs its host, at host speed: transfers through the board's
functional model (``netblt sim-board --model``) beside the software path, in one run.

    python -m netblt.bench.offload_bench [--size 1G]       (make bench-offload)

1. Offloaded send: ``netblt send --board`` through the model to ``netblt recv`` on
   loopback; offloaded receive: ``netblt send`` to ``netblt recv --board``; each on the
   Versa's DRAM geometry at 9000 and 1500-byte host-link datagrams, and on the
   Colorlight's block RAM at 1500. Beside them the software path, same size.
2. Per process, its CPU seconds per GB: the host that drives the board, its software
   peer, and the model (which stands for the board: not the host's cost).
3. The host link's uploads with a 200 us round trip between host and board (the
   model's ``--link-delay 100us``), 1500-byte datagrams, against the wire.
4. The host link alone, 1 MiB at a time through the compiled bulk path to a responder
   that answers at once (its own process), against the floor: the same bytes through
   one socket with nothing else (bench/board_bench.py's two), at 1500 and 9000 bytes.

Every transfer is checked byte-exact. The figures are a 2-core machine's: the model,
the host and the peer share its cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..driver.link import BoardLink
from ..formats import host_link as F
from ..host.units import parse_size
from .board_bench import kernel_floor, link_speed

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
CASES = (("versa_ecp5", "dram", 9000), ("versa_ecp5", "dram", 1500), ("colorlight_5a75b", "block", 1500))
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


class Model:
    """``netblt sim-board --model`` in the background, its CPU read from /proc."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(NETBLT + ["sim-board", "--model", *args], stdout=subprocess.PIPE, text=True)
        self.link = int(self.proc.stdout.readline().split(":")[-1])
        self.netblt = int(self.proc.stdout.readline().split(":")[1].split()[0])

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.communicate(timeout=30)


def started(args: list[str], cwd: Path) -> subprocess.Popen:
    proc = subprocess.Popen(args, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
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


def transfer(source: Path, out: Path, way: str, board: tuple[str, str, int] | None) -> Run:
    """One file ``way`` ("send": the board sends; "recv": it receives) through the model of
    ``board`` (None: the software path both ends)."""
    model = Model("--board", board[0], "--slots", board[1], "--mtu", str(board[2])) if board else None
    out.mkdir()
    try:
        on_board = ["--board", f"127.0.0.1:{model.link}", "--link-mtu", str(board[2])] if model else []
        if way == "send" or not model:
            port = free_port()
            recv = started(NETBLT + ["recv", "--listen", f"127.0.0.1:{port}", "--out", str(out), "--json"], out)
            local = ["--local-port", str(model.netblt)] if model else []
            sender = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{port}", "--json", *on_board, *local],
                                    capture_output=True, text=True, timeout=3600)
            received, _ = recv.communicate(timeout=120)
            host, peer = report(sender.stdout), report(received)
        else:
            recv = started(NETBLT + ["recv", "--listen", f":{model.netblt}", "--out", str(out), "--json",
                                     *on_board], out)
            sender = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{model.netblt}", "--json"],
                                    capture_output=True, text=True, timeout=3600)
            received, _ = recv.communicate(timeout=120)
            host, peer = report(received), report(sender.stdout)
        model_cpu = model.cpu() if model else 0.0
    finally:
        if model:
            model.close()
    if not (host["ok"] and peer["ok"]) or (out / source.name).stat().st_size != source.stat().st_size:
        raise SystemExit(f"netblt bench-offload: a transfer failed: {host['reason']} / {peer['reason']}")
    per_gb = 1e9 / source.stat().st_size
    what = f"{board[0]} {board[1]}, link {board[2]}" if board else "software path"
    unposted = sum(v for k, v in host["dropped"].items() if "no posted receive slot" in k)
    return Run(what, host["real_mbps"], host["cpu_seconds"] * per_gb, peer["cpu_seconds"] * per_gb,
               model_cpu * per_gb, -(-source.stat().st_size // host["buffer_size"]), source.stat().st_size,
               host["packets_lost"], unposted)


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
    args = parser.parse_args(argv)
    console = Console(width=140)
    with tempfile.TemporaryDirectory() as directory:
        tmp = Path(directory)
        source = tmp / "data.bin"
        with open(source, "wb") as f:
            for at in range(0, args.size, 1 << 24):
                f.write(os.urandom(min(1 << 24, args.size - at)))
        runs = {}
        for number, (way, board) in enumerate([(w, c) for c in CASES for w in ("send", "recv")] +
                                              [("send", None)]):
            console.print(f"[dim]{way} {board or 'software'} ...[/]")
            runs[way, board] = transfer(source, tmp / f"out{number}", way, board)
    uploads = {delay: uploads_with_delay(delay, 1500) for delay in ("0us", "100us")}
    console.print("[dim]the host link against the floor ...[/]")
    floor = {mtu: link_speed(mtu, 1 << 20) | {"floor": kernel_floor(mtu)} for mtu in (1500, 9000)}
    print_tables(console, runs, uploads, floor)
    return 0


def print_tables(console: Console, runs: dict, uploads: dict[str, float], floor: dict[int, dict]) -> None:
    table = Table(title="Through the board's model at host speed, CPU seconds per GB by process")
    for column in ("transfer", "Mb/s", "host driving it", "its software peer", "the model (the board)",
                   "buffers", "host CPU a buffer (us)", "lost", "unposted"):
        table.add_column(column, justify="left" if column == "transfer" else "right")
    for (way, board), run in runs.items():
        name = f"board {'sends' if way == 'send' else 'receives'}: {run.what}" if board else \
            "software send -> software recv (host: the sender)"
        table.add_row(name, f"{run.mbps:.0f}", f"{run.host_cpu:.2f}", f"{run.peer_cpu:.2f}",
                      f"{run.model_cpu:.2f}" if board else "", str(run.buffers),
                      f"{run.host_cpu * run.size / 1e9 / run.buffers * 1e6:.0f}", str(run.lost), str(run.unposted))
    console.print(table)
    software = runs["send", None]
    console.print(f"software path: sender {software.host_cpu:.2f} s per GB, receiver {software.peer_cpu:.2f}")
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
