"""Rate selection in virtual time: what a sender with no --rate achieves across paths.

    python -m netblt.bench.rate_bench            (make bench-auto, about two minutes)

Each case is a whole transfer between the real protocol cores over sim/wan/netem.py's path model
in virtual time (sim/wan/virtual.py), with what ``netblt send`` proposes by default (1448-byte
packets, 512 KiB buffers, 16 outstanding, a gigabit line's data a cap chosen
automatically), next to the same transfer at that cap throughout with no selection (the
sender's and receiver's behaviour before it). RFC 1030's Wideband setting is the last row.
Then a gigabit line at each MTU, the sender capped at its line or at the fixed 950M that
was the cap before. Figures only: the goals
are asserted, with margins, in tests/test_rate.py.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import replace

from rich.console import Console
from rich.table import Table

from ..driver.transport import line_data_bps, overhead
from ..host.cli import build_parser, params_from
from ..protocol.params import Params, burst_for_rate
from ..protocol.rate import RateSelector
from ..sim.wan.netem import PathConfig
from ..sim.wan.veth_path import ADDRESSES as VETH
from ..sim.wan.virtual import simulate

MB = 1 << 20
CASES = [
    # name, megabytes, forward path, one-way delay back, the goal
    ("100 Mb/s, 1 MB queue, 40 ms round trip", 100,
     PathConfig(delay=0.02, rate_bps=100e6, queue_bytes=MB), 0.02, ">= 90 Mb/s, <= 1% resent"),
    ("10 Mb/s, 600 ms round trip", 40, PathConfig(delay=0.3, rate_bps=10e6, queue_bytes=MB), 0.3, ">= 9 Mb/s"),
    ("10 Mb/s, 1.8 s round trip", 60, PathConfig(delay=0.9, rate_bps=10e6, queue_bytes=MB), 0.9, ""),
    ("1 Mb/s, 50 ms round trip", 8, PathConfig(delay=0.025, rate_bps=1e6, queue_bytes=MB), 0.025, ""),
    ("no bottleneck, 0.1 ms round trip", 300, PathConfig(delay=0.00005), 0.00005, ">= 900 Mb/s"),
    ("100 Mb/s, 1% random loss", 100, PathConfig(delay=0.02, rate_bps=100e6, queue_bytes=MB, loss=0.01), 0.02, ""),
    ("100 Mb/s, 5% random loss, 100 ms round trip", 100,
     PathConfig(delay=0.05, rate_bps=100e6, queue_bytes=MB, loss=0.05), 0.05, ""),
    ("100 Mb/s, burst loss (0.2% of packets start one)", 100,
     PathConfig(delay=0.02, rate_bps=100e6, queue_bytes=MB, burst_loss=0.002), 0.02, ""),
    ("100 Mb/s halving to 50 at 4 s", 100,
     PathConfig(delay=0.02, rate_bps=100e6, queue_bytes=MB, rate_changes=((4.0, 50e6),)), 0.02, ""),
    ("50 Mb/s doubling to 100 at 4 s", 100,
     PathConfig(delay=0.02, rate_bps=50e6, queue_bytes=MB, rate_changes=((4.0, 100e6),)), 0.02, ""),
]


def default_params(packet_size: int = 1448, packets: int = 0, buffers: int = 0, cap: float = 0.0) -> Params:
    """What ``netblt send --packet-size`` proposes with no other option (host/cli.py; its cap a
    gigabit line's, as toward an interface that reports no speed), with a death timer of 60 s
    for the long paths; ``packets`` a buffer, ``buffers`` outstanding and ``cap`` where given."""
    args = build_parser().parse_args(["send", "x", "127.0.0.1", "--packet-size", str(packet_size)])
    params = replace(params_from(args, limits=False, peer="127.0.0.1"), death_timer=60)
    if packets:
        params = replace(params, buffer_size=packet_size * packets)
    if buffers:
        params = replace(params, max_buffers=buffers)
    if cap:
        burst_size, burst_interval = burst_for_rate(cap, packet_size)
        params = replace(params, burst_size=burst_size, burst_interval=burst_interval)
    return params


def run(megabytes: float, params: Params, forward: PathConfig, back: float, seed: int = 1,
        selecting: bool = True) -> tuple[float, float, float]:
    """(steady-state Mb/s, Mb/s after 6 s, share of packets resent) of one transfer."""
    arrived = RateSelector.arrived
    if not selecting:
        RateSelector.arrived = lambda *args, **kwargs: None  # the receiver repeats the sender's rate
    try:
        result = simulate(os.urandom(int(megabytes * MB)), params, forward=forward,
                          backward=replace(PathConfig(), delay=back), seed=seed, time_limit=1800)
    finally:
        RateSelector.arrived = arrived
    progress = result.receiver.progress
    late = [(t, n) for t, n in progress.done_at if t >= 6.0]
    after = 8 * sum(n for _, n in late[1:-1]) / (late[-2][0] - late[0][0]) / 1e6 if len(late) > 3 else 0.0
    return progress.steady_state_bps() / 1e6, after, result.sender.dp.tx.resent / result.forward.counts["sent"]


def main() -> int:
    console = Console(width=160)
    table = Table(title="Rate selection, no --rate (virtual time; 1448-byte packets, 512 KiB buffers, 16 outstanding)")
    for column in ("path", "MB", "steady Mb/s", "after 6 s", "resent", "at the cap, no selection: steady",
                   "resent", "goal"):
        table.add_column(column, justify="right")
    for name, megabytes, forward, back, goal in CASES:
        steady, after, resent = run(megabytes, default_params(), forward, back)
        fixed, _, fixed_resent = run(megabytes, replace(default_params(), auto_rate=False), forward, back,
                                     selecting=False)
        table.add_row(name, str(megabytes), f"{steady:.2f}", f"{after:.2f}", f"{resent:.2%}", f"{fixed:.2f}",
                      f"{fixed_resent:.2%}", goal)
        console.print(f"  measured: {name}", style="dim")
    wideband = replace(default_params(1432, 10, 22), data_checksum=True)
    path = PathConfig(delay=0.9, jitter=0.02, loss=0.01, rate_bps=1.05e6, queue_bytes=64_000)
    auto = [run(716 * 4 / 1000, wideband, path, 0.9, seed) for seed in range(5)]
    set_up = Params(buffer_size=14320, packet_size=1432, burst_size=5, burst_interval=55, max_buffers=22,
                    data_checksum=True, death_timer=60)
    fixed = [run(716 * 4 / 1000, set_up, path, 0.9, seed, selecting=False)[0] for seed in range(5)]
    table.add_row("RFC 1030 Wideband (1.05 Mb/s, 1.8 s, 1% loss), 5 seeds", "2.9",
                  f"{statistics.median(a[0] for a in auto):.3f}", f"{statistics.median(a[1] for a in auto):.3f}",
                  f"{statistics.median(a[2] for a in auto):.2%}", f"{statistics.median(fixed):.3f} (its 5/55 ms)", "",
                  ">= 95% of the channel")
    console.print(table)
    console.print(gigabit_lines())
    return 0


GIGABIT_QUEUE = 3_500_000
"""Bytes the veth study's token bucket queues at a gigabit (sim/wan/veth_path.py: 20 ms and its 1 MB burst)."""


def gigabit_lines() -> Table:
    """A gigabit Ethernet line in virtual time, each MTU: a sender capped at the fixed 950M
    (the cap before) against one capped at its gigabit interface's line (host/cli.py
    ``automatic_cap``); 256 MiB."""
    table = Table(title="A gigabit line (3.5 MB queue, 0.1 ms round trip), no --rate, 256 MiB: the cap at 950M "
                        "or at the interface's line")
    for column in ("MTU", "line's data Mb/s", "cap", "opening to last byte, Mb/s", "steady Mb/s", "resent"):
        table.add_column(column, justify="right")
    for mtu in (1500, 4500, 9000):
        packet_size = mtu - overhead(VETH[1], "udp")
        line = line_data_bps(1e9, VETH[1], "udp", packet_size)
        for cap in (950e6, line):
            result = simulate(os.urandom(256 * MB), default_params(packet_size, cap=cap),
                              forward=PathConfig(delay=0.00005, rate_bps=line, queue_bytes=GIGABIT_QUEUE),
                              backward=PathConfig(delay=0.00005), time_limit=600)
            progress = result.receiver.progress
            table.add_row(str(mtu), f"{line / 1e6:.1f}", "950M" if cap == 950e6 else "the line",
                          f"{progress.real_bps() / 1e6:.1f}", f"{progress.steady_state_bps() / 1e6:.1f}",
                          f"{result.sender.dp.tx.resent / result.forward.counts['sent']:.2%}")
    return table


if __name__ == "__main__":
    raise SystemExit(main())
