"""A receiving station's senders at once (host/station.py; ``make bench-station``, needs root).

Four senders, each in a network namespace of its own and joined to the station's by a
veth pair held to 200 Mb/s each way (sim/wan/veth_path.py ``VethStar``), send a file each
at once, with no ``--rate``, into one ``netblt recv --keep-serving``. Then the same with a
fifth sender beside them that misbehaves: it stalls mid-transfer (SIGSTOP), it aborts
(SIGINT), or it sprays garbage at the station's port. Each case prints the four senders'
receiving rates (the station's reports: set-up to last byte), their sum, the data
together over the wall time from the first start to the last end, every file checked
byte for byte, and the station's CPU: its listener and each sender's process.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import namespaces_allowed
from ..sim.wan.veth_path import VethStar

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
SENDERS = 4
RATE = "200mbit"
PORT = 2998
CASES = ("alone", "a fifth stalls", "a fifth aborts", "a fifth sprays")


def _digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _spray(star: VethStar, side: int, until: float) -> subprocess.Popen:
    """Garbage datagrams and NETBLT-looking headers at the station's port from ``side``'s
    namespace, some 20,000 a second, until ``until`` (monotonic)."""
    code = (f"import os, random, socket, time\nr = random.Random(1)\ns = socket.socket(socket.AF_INET, "
            f"socket.SOCK_DGRAM)\nwhile time.monotonic() < {until}:\n"
            f"    for _ in range(20):\n"
            f"        s.sendto(bytes([r.randrange(16)]) + r.randbytes(r.choice((0, 23, 200, 1400))), "
            f"('{star.station_address(side)}', {PORT}))\n"
            f"    time.sleep(0.001)\n")
    return subprocess.Popen(star.exec(side, sys.executable, "-c", code))


def run(star: VethStar, files: list[Path], out: Path, case: str) -> dict:
    """One round: the station, its four senders and (but ``alone``) the fifth's deed."""
    for old in out.iterdir():
        old.unlink()
    station = subprocess.Popen(star.exec(0, *NETBLT, "recv", "--listen", f":{PORT}", "--out", f"{out}/",
                                         "--keep-serving", "--json"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if "waiting for a sender" not in station.stderr.readline():
        raise RuntimeError("the station did not start: " + station.stderr.read())
    threading.Thread(target=station.stderr.read, daemon=True).start()
    started = time.monotonic()
    senders = [subprocess.Popen(star.exec(i, *NETBLT, "send", str(files[i - 1]), star.station_address(i), "--json"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i in range(1, SENDERS + 1)]
    fifth, spray = None, None
    if case != "alone":
        time.sleep(1)
        if case == "a fifth sprays":
            spray = _spray(star, SENDERS + 1, time.monotonic() + 30)
        else:
            fifth = subprocess.Popen(star.exec(SENDERS + 1, *NETBLT, "send", str(files[-1]),
                                               star.station_address(SENDERS + 1), "--json"),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_default_int)
            time.sleep(1)
            fifth.send_signal(signal.SIGSTOP if case == "a fifth stalls" else signal.SIGINT)
    for sender in senders:
        sender.communicate(timeout=600)
    ended = time.monotonic()
    for proc in (fifth, spray):
        if proc is not None:
            proc.kill()
            proc.wait()
    station.send_signal(signal.SIGTERM)
    reports = [json.loads(line) for line in station.communicate(timeout=60)[0].splitlines() if line.startswith("{")]
    ours = {r["name"]: r for r in reports if r["name"] in {f.name for f in files[:SENDERS]}}
    intact = all(r["ok"] for r in ours.values()) and len(ours) == SENDERS and \
        all(_digest(out / f.name) == _digest(f) for f in files[:SENDERS])
    moved = sum(f.stat().st_size for f in files[:SENDERS])
    return {"rates": [ours[f.name]["real_mbps"] for f in files[:SENDERS] if f.name in ours],
            "together": moved * 8 / (ended - started) / 1e6, "intact": intact,
            "cpu": [ours[f.name]["cpu_seconds"] for f in files[:SENDERS] if f.name in ours]}


def reuseport_spread(trials: int = 1000) -> tuple[float, float]:
    """What SO_REUSEPORT alone would do with four senders (the alternative the station
    does not take): four unconnected sockets on one port, four senders from fresh ports a
    trial; the share of trials where the kernel's hash puts two or more on one socket, and
    the busiest socket's senders on average."""
    group = []
    for _ in range(SENDERS):
        member = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        member.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        member.bind(("127.0.0.1", group[0].getsockname()[1] if group else 0))
        member.setblocking(False)
        group.append(member)
    shared, busiest = 0, 0
    try:
        for _ in range(trials):
            senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(SENDERS)]
            for sender in senders:
                sender.sendto(b"x", group[0].getsockname())
            counts = [_drained(member) for member in group]
            shared += max(counts) > 1
            busiest += max(counts)
            for sender in senders:
                sender.close()
    finally:
        for member in group:
            member.close()
    return shared / trials, busiest / trials


def _drained(member: socket.socket) -> int:
    got = 0
    while True:
        try:
            member.recv(16)
        except BlockingIOError:
            return got
        got += 1


def _default_int() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", type=int, default=128, help="MiB each sender sends (default: 128)")
    args = parser.parse_args(argv)
    if not namespaces_allowed("bench-station", "network namespaces"):
        return 2
    console = Console(width=200)
    shared, busiest = reuseport_spread()
    console.print(f"SO_REUSEPORT alone, {SENDERS} senders over {SENDERS} sockets: two or more on one socket in "
                  f"{shared:.1%} of trials, the busiest socket's senders {busiest:.2f} on average", highlight=False)
    table = Table(title=f"{SENDERS} senders at once into one station, each through its own {RATE} path "
                        f"(veth + tbf), {args.size} MiB each, median of {args.runs}")
    for column in ("case", "each sender's Mb/s (median of its runs)", "sum Mb/s", "together Mb/s (wall, start-ups in)",
                   "others against alone", "files intact", "CPU s per sender process"):
        table.add_column(column, justify="right", no_wrap=True)
    rng = random.Random(5)
    with tempfile.TemporaryDirectory(prefix="netblt-station-") as tmp:
        files = []
        for i in range(1, SENDERS + 2):
            path = Path(tmp) / f"sender{i}.bin"
            path.write_bytes(rng.randbytes(args.size << 20))
            files.append(path)
        out = Path(tmp) / "in"
        out.mkdir()
        with VethStar(SENDERS + 1, RATE) as star:
            alone = None
            for case in CASES:
                rounds = [run(star, files, out, case) for _ in range(args.runs)]
                sums = [sum(r["rates"]) for r in rounds]
                middle = rounds[sums.index(statistics.median_low(sums))]
                if case == "alone":
                    alone = statistics.median(sums)
                table.add_row(case, " ".join(f"{statistics.median(r['rates'][i] for r in rounds):.1f}"
                                             for i in range(SENDERS)),
                              f"{statistics.median(sums):.1f} ({', '.join(f'{s:.1f}' for s in sums)})",
                              f"{statistics.median(r['together'] for r in rounds):.1f}",
                              f"{statistics.median(sums) / alone:.3f}",
                              "yes" if all(r["intact"] for r in rounds) else "NO",
                              " ".join(f"{c:.2f}" for c in middle["cpu"]))
                console.print(f"{case}: {sums}", highlight=False)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
