"""``make bench-tcp`` (root): NETBLT without ``--rate`` next to Linux TCP on the same path.

Each path model is applied by :class:`~netblt.sim.wan.tun_path.TunPath` between two network
namespaces, so NETBLT over UDP and TCP meet the same bottleneck, queue, delay and loss.
NETBLT is ``netblt send``/``netblt recv`` with default options (its rate selected as it
goes); TCP is one connection with the named congestion control (reno, cubic, bbr), the
kernel's default buffer autotuning, and its goodput taken at the receiver from the
first byte to the last (a run stops after TCP_SECONDS if its data is not all sent).
Prints a table; docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import namespaces_allowed
from ..sim.wan.netem import PathConfig
from ..sim.wan.tun_path import ADDRESSES, Namespaces, TunPath

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
PORT = 5001
SINK = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
print("ready", flush=True)
c, _ = s.accept()
n, first = 0, None
while data := c.recv(1 << 20):
    if first is None:
        first, cpu = time.monotonic(), time.process_time()
    n += len(data)
print(n, time.monotonic() - first, time.process_time() - cpu)
"""
SOURCE = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, sys.argv[1].encode())
s.connect((sys.argv[4], int(sys.argv[5])))
block, end = bytes(1 << 16), time.monotonic() + float(sys.argv[3])
started, cpu = time.monotonic(), time.process_time()
for _ in range(-(-int(sys.argv[2]) // len(block))):
    s.sendall(block)
    if time.monotonic() > end:
        break
s.close()
print((time.process_time() - cpu) / (time.monotonic() - started))
"""
"""A TCP sink and source, each its own process: the sink prints the bytes, the seconds from
the first byte to the last and its CPU seconds meanwhile; the source its CPU share."""
TCP_SECONDS = 40.0
"""A TCP run stops after this long if its data is not all sent (reno and cubic through 1%
loss move a few Mb/s): its goodput is what arrived over the time it ran."""
CONTROLS = ("reno", "cubic", "bbr")
CASES = [
    ("100 Mb/s, 1 MB queue, 20 ms each way", PathConfig(delay=0.02, rate_bps=100e6, queue_bytes=1 << 20), 100),
    ("10 Mb/s, 1 MB queue, 300 ms each way", PathConfig(delay=0.3, rate_bps=10e6, queue_bytes=1 << 20), 25),
    ("100 Mb/s, 1% loss, 20 ms each way", PathConfig(delay=0.02, rate_bps=100e6, queue_bytes=1 << 20, loss=0.01),
     100),
]


@dataclass
class TcpRun:
    mbps: float
    """Goodput at the receiver, its first byte to its last."""
    sender_cpu: float
    receiver_cpu: float
    """Shares of a core, over the transfer."""


def tcp_run(namespaces: Namespaces, control: str, size: int, seconds: float = TCP_SECONDS,
            addresses: tuple[str, str] = ADDRESSES) -> TcpRun:
    """One TCP transfer of ``size`` bytes (in blocks of 64 KiB) from side a to side b,
    stopped after ``seconds``: its goodput and each end's CPU."""
    sink = subprocess.Popen(namespaces.exec(1, sys.executable, "-c", SINK, addresses[1], str(PORT)),
                            stdout=subprocess.PIPE, text=True)
    if sink.stdout.readline() != "ready\n":
        raise RuntimeError("the TCP sink did not start")
    sent = subprocess.run(namespaces.exec(0, sys.executable, "-c", SOURCE, control, str(size), str(seconds),
                                          addresses[1], str(PORT)), check=True, timeout=600, capture_output=True,
                          text=True)
    n, elapsed, cpu = sink.communicate(timeout=600)[0].split()
    return TcpRun(int(n) * 8 / float(elapsed) / 1e6, float(sent.stdout), float(cpu) / float(elapsed))


def netblt_run(namespaces: Namespaces, source: Path, out: Path, options: tuple[str, ...] = (),
               limits: tuple[str, ...] = (), addresses: tuple[str, str] = ADDRESSES) -> tuple[dict, dict]:
    """One ``netblt send`` from side a to side b, default options but ``options``, the
    receiver given ``limits``: the sender's report and the receiver's (with ``resent_share``)."""
    recv = subprocess.Popen(namespaces.exec(1, *NETBLT, "recv", "--listen", f"{addresses[1]}:2998", "--out",
                                            f"{out}/", "--json", *limits),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recv.stderr.readline()
    sent = subprocess.run(namespaces.exec(0, *NETBLT, "send", str(source), addresses[1], "--json", *options),
                          capture_output=True, text=True, timeout=900)
    report = json.loads(recv.communicate(timeout=900)[0])
    if sent.returncode or not report["ok"]:
        raise RuntimeError(f"netblt transfer failed: {sent.stderr.strip()} / {report['reason']}")
    (out / source.name).unlink()
    sender = json.loads(sent.stdout)
    report["resent_share"] = sender["packets_retransmitted"]
    return sender, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    if not namespaces_allowed("bench-tcp", "network namespaces and TUN devices"):
        return 2
    console = Console(width=200)
    table = Table(title=f"NETBLT without --rate against Linux TCP through the same emulated path, "
                        f"median of {args.runs}")
    for column in ("path", "MB", "NETBLT steady", "NETBLT real", "NETBLT resent", *(f"TCP {c}" for c in CONTROLS)):
        table.add_column(column, justify="right", no_wrap=True)
    with tempfile.TemporaryDirectory(prefix="netblt-tcp-") as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        for name, config, megabytes in CASES:
            source = Path(tmp) / f"{megabytes}.bin"
            if not source.exists():
                source.write_bytes(os.urandom(megabytes << 20))
            with TunPath(config) as tun:
                done = threading.Event()
                relay = threading.Thread(target=tun.run, kwargs={"stop": done.is_set}, daemon=True)
                relay.start()
                try:
                    ours = [netblt_run(tun, source, out)[1] for _ in range(args.runs)]
                    theirs = {c: statistics.median(tcp_run(tun, c, megabytes << 20).mbps for _ in range(args.runs))
                              for c in CONTROLS}
                finally:
                    done.set()
                    relay.join()
            packets = statistics.median(r["resent_share"] for r in ours)
            total = megabytes * (1 << 20) / 1448
            table.add_row(name, str(megabytes),
                          f"{statistics.median(r['steady_state_mbps'] for r in ours):.1f} Mb/s",
                          f"{statistics.median(r['real_mbps'] for r in ours):.1f} Mb/s",
                          f"{100 * packets / (total + packets):.2f}%",
                          *(f"{theirs[c]:.1f} Mb/s" for c in CONTROLS))
            console.print(f"  measured: {name}", style="dim")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
