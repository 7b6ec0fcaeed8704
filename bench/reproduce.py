"""The seed reports' tables that netblt can answer, regenerated beside the reports' own numbers.

    python -m netblt.bench.reproduce [--quick]                  (make reproduce)

Each study runs netblt on the setting a report measured, prints the report's figure, ours
and their ratio side by side, and draws them (docs/figures/<study>.svg, matplotlib). The
tables also go to docs/reproduce.md, with the command and the machine that made them.
``--quick`` runs each setting once (a full reproduction, three times): the pipeline end to
end, for make test.

In virtual time: RFC 1030's Wideband satellite, token ring and Ethernet tables (its appendices
IV, II and III) and the Keck report's TCP over the ACTS satellite. As root, in real time
between network namespaces: NETBLT against Linux TCP (reno, cubic, bbr) across the RIG
report's one and two T1 satellite hops and across Keck's path as the bit error rate rises
(``netblt netem --tun``), and Haystack's throughput and CPU load against MTU on a gigabit
veth pair. Under Verilator: the gateware at its GMII wires, for Haystack's gigabit table
and the RIG report's loss-free packets a second. Without root the real-time studies give
NETBLT in virtual time (TCP needs root) or nothing (Haystack's).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from ..formats.host_link import IP_UDP_HEADERS  # noqa: E402
from ..formats.rfc998 import DATA_HEADER_SIZE  # noqa: E402
from ..protocol.params import Params, burst_for_rate  # noqa: E402
from ..sim.rtl import hdl  # noqa: E402
from ..sim.rtl.sim_board import design  # noqa: E402
from ..sim.wan.netem import PathConfig  # noqa: E402
from ..sim.wan.tun_path import TunError, TunPath  # noqa: E402
from ..sim.wan.virtual import simulate  # noqa: E402
from ..sim.wan.veth_path import ADDRESSES as VETH_ADDRESSES, VethPath  # noqa: E402
from .tcp_bench import CONTROLS, TcpRun, netblt_run, tcp_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SEEDS = 3
"""Runs of each setting (a seed each) in a full reproduction."""


@dataclass(frozen=True)
class Rfc1030Run:
    """One row of RFC 1030's appendix tables: its settings and steady-state Mb/s."""

    burst: int
    interval_ms: int
    packet: int
    buffer: int
    kilobytes: int
    """The transfer, in thousands of bytes (716 is 50 buffers of 14,320)."""
    buffers: int
    lost: int
    speed: float

    @property
    def setting(self) -> tuple[int, int, int, int]:
        return self.burst, self.interval_ms, self.packet, self.buffers

    @property
    def packets(self) -> int:
        return -(-self.kilobytes * 1000 // self.packet)


def _rows(text: str) -> tuple[Rfc1030Run, ...]:
    """Rows as the RFC prints them: BS/BI PSZ BFSZ XFSZ NBUFS #LOSS #RXM SPEED."""
    rows = []
    for line in text.strip().splitlines():
        rate, packet, buffer, kilobytes, buffers, lost, _, speed = line.split()
        burst, interval = rate.split("/")
        rows.append(Rfc1030Run(int(burst), int(interval), int(packet), int(buffer), int(kilobytes), int(buffers),
                               int(lost), float(speed)))
    return tuple(rows)


RFC1030_WIDEBAND = _rows("""
5/90 1400 14000 500 22 9 10 0.584
5/90 1400 14000 500 22 12 12 0.576
5/90 1400 14000 500 22 3 3 0.591
5/90 1420 14200 500 22 12 12 0.591
5/90 1420 14200 500 22 6 6 0.600
5/90 1430 14300 500 22 9 10 0.600
5/90 1430 14300 500 22 15 15 0.591
5/90 1430 14300 500 22 12 12 0.590
5/90 1432 14320 716 22 13 16 0.591
5/90 1434 14340 717 22 33 147 0.483
5/90 1436 14360 718 22 25 122 0.500
5/90 1436 14360 718 22 25 109 0.512
5/90 1436 14360 718 22 28 153 0.476
5/90 1438 14380 719 22 6 109 0.533
5/80 1432 14320 716 22 56 68 0.673
5/80 1432 14320 716 22 14 14 0.666
5/80 1432 14320 716 22 15 16 0.661
5/60 1432 14320 716 22 19 22 0.856
5/60 1432 14320 716 22 84 95 0.699
5/60 1432 14320 716 22 18 21 0.871
5/60 1432 14320 716 30 38 40 0.837
5/60 1432 14320 716 30 25 26 0.869
5/55 1432 14320 716 22 13 13 0.935
5/55 1432 14320 716 22 25 25 0.926
5/55 1432 14320 716 22 25 25 0.926
5/55 1432 14320 716 22 20 20 0.932
5/55 1432 14320 716 22 17 19 0.934
5/55 1432 14320 716 22 13 14 0.942
""")
"""RFC 1030 appendix IV: an IBM PC/AT and a SUN-3 across the Wideband satellite network
(1987), transfers of 500 to 719 thousand bytes."""

WIDEBAND = PathConfig(delay=0.9, jitter=0.02, rate_bps=1.045e6, queue_bytes=64_000)
"""The Wideband channel as RFC 1030 describes it: 1.8 s round trip, 1.045 Mb/s usable
(two 1,500-byte Ethernet packets a 21.22 ms channel frame, its appendix I), packets held
a little in the gateways' queues."""


@dataclass
class Compared:
    """One setting: the report's figures (its repeats; none where it gave no number), ours
    (a run a seed) and, where a study runs them too, other protocols' on the same path."""

    label: str
    x: float
    theirs: list[float]
    ours: list[float]
    others: dict[str, list[float]] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        return statistics.median(self.ours) / statistics.median(self.theirs) if self.theirs and self.ours else None


def rfc1030_wideband(quick: bool) -> list[Compared]:
    """Each setting of the table over the Wideband path, losing the share of packets the
    report lost on it (the PC/AT's receive drops, mostly), steady state as RFC 1030 defines
    it (the receiver's buffers from the first to the start of the last)."""
    out = []
    for (burst, interval, packet, buffers), runs in _settings(RFC1030_WIDEBAND).items():
        first = runs[0]
        loss = statistics.median(r.lost / r.packets for r in runs)
        params = Params(buffer_size=first.buffer, packet_size=packet, burst_size=burst, burst_interval=interval,
                        max_buffers=buffers, data_checksum=True, death_timer=60)
        path = PathConfig(**{**WIDEBAND.__dict__, "loss": loss})
        ours = [_mbps(first.kilobytes * 1000, params, path, seed) for seed in range(1 if quick else SEEDS)]
        real = {} if quick or os.geteuid() else {REAL_TIME: [_real_time_steady(path, first.kilobytes * 1000, params)]}
        out.append(Compared(f"{burst}/{interval} ms, {packet} B, {buffers} buffers", interval,
                            [r.speed for r in runs], ours, real))
    return out


REAL_TIME = "netblt in real time (TUN relay)"


def _real_time_steady(config: PathConfig, size: int, params: Params, backward: PathConfig | None = None) -> float:
    """RFC 1030's steady state of one ``netblt send`` with ``params`` through ``config``
    (and ``backward``, the way back: ``config``'s delay unless given) in real time
    (`netblt netem --tun`'s relay), as the receiver reports it."""
    options = ("--packet-size", str(params.packet_size), "--buffer-size", str(params.buffer_size),
               "--burst-size", str(params.burst_size), "--burst-interval", str(params.burst_interval),
               "--buffers", str(params.max_buffers), "--data-checksum")
    with through(config, size, backward, RING_MTU if params.packet_size > 1448 else 1500) as (tun, source, out):
        return netblt_run(tun, source, out, options)[1]["steady_state_mbps"]


@contextmanager
def through(config: PathConfig, size: int, backward: PathConfig | None = None, mtu: int = 1500
            ) -> Iterator[tuple[TunPath, Path, Path]]:
    """``config`` (and ``backward``) between two namespaces at ``mtu``, their relay
    running in a thread while the block runs, with ``size`` random bytes to send and a
    folder to receive them in."""
    with _data(size) as (source, out), TunPath(config, backward, name="nb-repro", mtu=mtu) as tun:
        done = threading.Event()
        relay = threading.Thread(target=tun.run, kwargs={"stop": done.is_set}, daemon=True)
        relay.start()
        try:
            yield tun, source, out
        finally:
            done.set()
            relay.join()


@contextmanager
def _data(size: int) -> Iterator[tuple[Path, Path]]:
    """A file of ``size`` random bytes and an empty folder, gone after the block."""
    with tempfile.TemporaryDirectory(prefix="netblt-reproduce-") as folder:
        source, out = Path(folder) / "data", Path(folder) / "out"
        source.write_bytes(os.urandom(size))
        out.mkdir()
        yield source, out


def _settings(table: tuple[Rfc1030Run, ...]) -> dict[tuple[int, int, int, int], list[Rfc1030Run]]:
    """The table's rows by setting, in the table's order."""
    settings: dict[tuple[int, int, int, int], list[Rfc1030Run]] = {}
    for run in table:
        settings.setdefault(run.setting, []).append(run)
    return settings


def _mbps(size: int, params: Params, forward: PathConfig, seed: int, steady: bool = True,
          backward: PathConfig | None = None) -> float:
    """One transfer in virtual time: RFC 1030's steady state, or (``steady`` false) what the
    user sees, from the connection's opening to the last byte. The way back has the way
    out's delay unless given."""
    backward = backward or PathConfig(delay=forward.delay, jitter=forward.jitter)
    result = simulate(bytes(size), params, forward=forward, seed=seed, backward=backward, time_limit=600)
    if not result.ok:
        raise SystemExit(f"reproduce: a transfer failed: {result.reason}")
    progress = result.receiver.progress
    return (progress.steady_state_bps() if steady else progress.real_bps()) / 1e6


RFC1030_TOKEN_RING = _rows("""
5/25 1438 14380 1438 1 0 0 1.45
5/25 1438 14380 1438 1 0 0 1.45
5/30 1438 14380 1438 1 0 0 1.45
5/30 1438 14380 1438 1 0 0 1.45
5/35 1438 14380 1438 1 0 0 1.40
5/35 1438 14380 1438 1 0 0 1.41
5/40 1438 14380 1438 1 0 0 1.33
5/40 1438 14380 1438 1 0 0 1.33
5/25 1438 14380 1438 2 0 0 1.62
5/25 1438 14380 1438 2 0 0 1.61
5/30 1438 14380 1438 2 0 0 1.60
5/30 1438 14380 1438 2 0 0 1.61
5/34 1438 14380 1438 2 0 0 1.59
5/35 1438 14380 1438 2 0 0 1.58
5/25 1990 19900 1990 1 0 0 1.48
5/25 1990 19900 1990 1 0 0 1.49
5/30 1990 19900 1990 1 0 0 1.48
5/30 1990 19900 1990 1 0 0 1.48
5/35 1990 19900 1990 1 0 0 1.49
5/35 1990 19900 1990 1 0 0 1.48
5/40 1990 19900 1990 1 0 0 1.49
5/40 1990 19900 1990 1 0 0 1.49
5/45 1990 19900 1990 1 0 0 1.45
5/45 1990 19900 1990 1 0 0 1.46
5/25 1990 19900 1990 2 0 0 1.75
5/25 1990 19900 1990 2 0 0 1.75
5/30 1990 19900 1990 2 0 0 1.74
5/30 1990 19900 1990 2 0 0 1.75
5/35 1990 19900 1990 2 0 0 1.74
5/35 1990 19900 1990 2 0 0 1.74
5/40 1990 19900 1990 2 0 0 1.75
5/40 1990 19900 1990 2 0 0 1.74
5/43 1990 19900 1990 2 0 0 1.75
5/43 1990 19900 1990 2 0 0 1.74
5/43 1990 19900 1990 2 0 0 1.75
5/44 1990 19900 1990 2 0 0 1.73
5/44 1990 19900 1990 2 0 0 1.72
5/45 1990 19900 1990 2 0 0 1.70
5/45 1990 19900 1990 2 0 0 1.72
""")
"""RFC 1030 appendix II: two IBM PC/ATs on a 10 Mb/s Proteon token ring (DTMOS left out:
every row has none)."""

RFC1030_ETHERNET = _rows("""
5/30 1438 14380 1438 1 9 9 1.42
5/30 1438 14380 1438 1 2 2 1.45
5/30 1438 14380 1438 1 5 5 1.44
5/35 1438 14380 1438 1 7 7 1.38
5/35 1438 14380 1438 1 6 6 1.38
5/40 1438 14380 1438 1 48 48 1.15
5/40 1438 14380 1438 1 50 50 1.17
5/40 1438 14380 1438 1 13 13 1.28
5/40 1438 14380 1438 1 7 7 1.30
5/30 1438 14380 1438 2 206 206 0.995
5/30 1438 14380 1438 2 213 213 0.994
5/40 1438 14380 1438 2 117 121 1.05
5/40 1438 14380 1438 2 178 181 0.892
5/40 1438 14380 1438 2 135 138 1.03
5/45 1438 14380 1438 2 57 57 1.12
5/45 1438 14380 1438 2 97 97 1.02
5/45 1438 14380 1438 2 62 62 1.09
5/15 512 10240 2048 1 6 6 0.909
5/15 512 10240 2048 1 10 11 0.907
5/18 512 10240 2048 1 11 11 0.891
5/18 512 10240 2048 1 5 5 0.906
5/19 512 10240 2048 1 3 3 0.905
5/19 512 10240 2048 1 8 8 0.898
5/20 512 10240 2048 1 7 7 0.876
5/20 512 10240 2048 1 11 12 0.871
5/20 512 10240 2048 1 8 9 0.874
5/30 512 10240 2048 2 113 116 0.599
5/30 512 10240 2048 2 20 20 0.661
5/30 512 10240 2048 2 49 50 0.638
""")
"""RFC 1030 appendix III: two IBM PC/ATs with 3COM 3C500 interfaces on MIT's busy 10 Mb/s
Ethernet (DTMOS left out)."""


@dataclass(frozen=True)
class PcAt:
    """An IBM PC/AT end as RFC 1030's section 4 times it: a maximum-sized packet sent in
    ``send`` seconds and received in ``receive``; the LAN itself is ten times faster."""

    packet: int
    send: float
    receive: float

    def path(self, packet: int, loss: float) -> PathConfig:
        """The LAN as the data sees it: the sender's per-byte copying as the bottleneck,
        the receiver's time for the last packet as the delay."""
        per_packet = self.send * packet / self.packet
        return PathConfig(delay=self.receive * packet / self.packet, loss=loss,
                          rate_bps=(packet + DATA_HEADER_SIZE) * 8 / per_packet)

    @property
    def mbps(self) -> float:
        return self.packet * 8 / self.send / 1e6


RING_MTU = 2046
"""The Proteon ring's MTU (RFC 1030 section 5), for its 1,990-byte packets in real time."""
TOKEN_RING_PC = PcAt(1990, 0.008, 0.008)
ETHERNET_PC = PcAt(1438, 0.0060, 0.0061)
CONTROL_TIME = 0.003
"""Seconds a control message costs the PC/AT that gets it: RFC 1030's section 5 (the
2-3 ms gap control messages force between bursts), as the way back's delay."""


def rfc1030_lan(table: tuple[Rfc1030Run, ...], pc: PcAt, quick: bool) -> list[Compared]:
    """Each setting of a LAN table, the PC/ATs' own speed as the path, losing the share
    of packets the report lost (the 3C500s' single buffer, mostly)."""
    out, timed, real_time = [], set(), not (quick or os.geteuid())
    back = PathConfig(delay=CONTROL_TIME)
    for (burst, interval, packet, buffers), runs in _settings(table).items():
        first = runs[0]
        loss = statistics.median(r.lost / r.packets for r in runs)
        params = Params(buffer_size=first.buffer, packet_size=packet, burst_size=burst, burst_interval=interval,
                        max_buffers=buffers, data_checksum=True, death_timer=60)
        path = pc.path(packet, loss)
        ours = [_mbps(first.kilobytes * 1000, params, path, seed, backward=back)
                for seed in range(1 if quick else SEEDS)]
        real = []
        if real_time and (packet, buffers) not in timed:  # in real time, the first setting of each kind
            timed.add((packet, buffers))
            real.append(_real_time_steady(path, first.kilobytes * 1000, params, back))
        out.append(Compared(f"{burst}/{interval} ms, {packet} B, {buffers} buffer{'s' * (buffers > 1)}"
                            + (f", {loss:.1%} lost" if loss else ""), interval, [r.speed for r in runs], ours,
                            {REAL_TIME: real} if real_time else {}))
    return out


KECK_RTT = 0.56
"""Seconds: the ACTS satellite path's round trip, as the report's figures put it (its
1 MB TCP window gave 15 Mb/s: 8.4 Mb a round trip); a geostationary hop and the
terrestrial legs either side."""
KECK_PATH = PathConfig(delay=KECK_RTT / 2, rate_bps=39e6, queue_bytes=4 << 20)
"""Keck to Caltech over ACTS, limited by Hawaii's DS-3: 45 Mb/s, of which 87% is data
after the ATM cells' overhead, the report's 39 Mb/s."""
KECK = ((1, 15.0, "1 MB outstanding: the report's TCP window (SunOS's limit), measured"),
        (3, 39.0, "3 MB outstanding: the window the report says the path needs, and its expected rate"))
"""(MB outstanding, the report's Mb/s, what that figure is)."""


def keck_acts(quick: bool) -> list[Compared]:
    """netblt on the same path with as much data outstanding as the report's TCP window:
    buffers of 256 KiB, at the path's rate, 24 MiB memory to memory as ttcp measured."""
    out = []
    for megabytes, theirs, label in KECK:
        burst_size, burst_interval = burst_for_rate(KECK_PATH.rate_bps, 1448)
        params = Params(buffer_size=256 << 10, packet_size=1448, burst_size=burst_size,
                        burst_interval=burst_interval, max_buffers=4 * megabytes, data_checksum=False,
                        death_timer=60)
        size = (8 if quick else 24) << 20
        ours = [_mbps(size, params, KECK_PATH, seed, steady=False) for seed in range(1 if quick else SEEDS)]
        out.append(Compared(label, megabytes, [theirs], ours))
    return out


T1 = 1.536e6
"""Bits a second a T1 carries (24 channels of 64 kb/s)."""
HOP = 0.27
"""Seconds one way across one geostationary satellite hop, ground to ground."""
RIG = ((1, 130 * 8e3 / 1e6, "one T1 satellite hop: the most the report's TCP reached (130 KB/s)"),
       (2, 50 * 8e3 / 1e6, "two hops: 20 connections of 16 KB windows (50 KB/s)"))
"""(satellite hops, the report's Mb/s, what that figure is): the RIG report's file transfers
(mftp, several TCP connections) between NASA centres."""
KECK_BER = (0.0, 1e-7, 1e-6, 1e-5)
"""Bit error rates for the Keck path: a clean fibre, then worse than the microwave links the
report replaced (its TCP's dependence on them is in a plot we do not have)."""


def _sizes(quick: bool) -> tuple[int, int]:
    """Bytes a transfer across the T1 hops and across Keck's DS-3: small for --quick."""
    return (64 << 10, 256 << 10) if quick else (2 << 20, 8 << 20)


def rig_hops(quick: bool) -> list[Compared]:
    """NETBLT and Linux TCP across one and two T1 satellite hops (0.54 s a round trip a
    hop), through the TUN relay as root; NETBLT alone in virtual time otherwise."""
    size = _sizes(quick)[0]
    paths = [(PathConfig(delay=HOP * hops, rate_bps=T1, queue_bytes=100_000), theirs, label, hops)
             for hops, theirs, label in RIG[:1 if quick else 2]]
    return [_against_tcp(label, hops, [theirs], config, size, ["--buffer-size", "64K"], quick)
            for config, theirs, label, hops in paths]


def keck_ber(quick: bool) -> list[Compared]:
    """NETBLT and Linux TCP across Keck's ACTS path as the bit error rate rises: each
    1,500-byte packet lost with the chance that one of its bits is wrong."""
    size = _sizes(quick)[1]
    out = []
    for ber in KECK_BER[:1 if quick else None]:
        loss = 1 - (1 - ber) ** (1500 * 8)
        config = PathConfig(**{**KECK_PATH.__dict__, "loss": loss})
        out.append(_against_tcp(f"BER {ber:g} ({loss:.2%} of packets)", math.log10(ber) if ber else -8.0, [],
                                config, size, ["--buffer-size", "256K", "--buffers", "16"], quick))
    return out


def _against_tcp(label: str, x: float, theirs: list[float], config: PathConfig, size: int, options: list[str],
                 quick: bool) -> Compared:
    """NETBLT (default options but ``options``) and each TCP through ``config`` in real
    time, from the opening to the last byte; without root, NETBLT in virtual time only."""
    if os.geteuid():
        burst_size, burst_interval = burst_for_rate(config.rate_bps, 1448)
        params = Params(buffer_size=64 << 10, packet_size=1448, burst_size=burst_size,
                        burst_interval=burst_interval, max_buffers=16, data_checksum=False, death_timer=60)
        return Compared(label + " (virtual time: TCP needs root)", x, theirs,
                        [_mbps(size, params, config, seed, steady=False) for seed in range(1 if quick else SEEDS)])
    runs = 1 if quick else REALTIME_RUNS
    with through(config, size) as (tun, source, out):
        ours = [netblt_run(tun, source, out, tuple(options))[1]["real_mbps"] for _ in range(runs)]
        others = {f"TCP {c}": [tcp_run(tun, c, size, TCP_LIMIT).mbps for _ in range(runs)]
                  for c in (CONTROLS[-1:] if quick else CONTROLS)}
    return Compared(label, x, theirs, ours, others)


IP_HEADER = 20
HAYSTACK_TCP = {9000: 990.061369, 4500: 981.403262, 1500: 704.106792}
"""Haystack's table 5: TCP's mean Mb/s between its two workstations, by MTU (iperf, 15 minutes)."""
HAYSTACK_CPU = {"sending": (57.0, 98.0), "receiving": (43.0, 60.0)}
"""Haystack's table 6: each workstation's CPU load (%) sending and receiving at 9000 bytes."""


@dataclass
class GigabitRuns:
    """NETBLT (the sender's and receiver's reports) and TCP between two namespaces at one MTU."""

    netblt: list[tuple[dict, dict]]
    tcp: list[TcpRun]


@functools.cache
def gigabit_runs(quick: bool) -> dict[int, GigabitRuns]:
    """Each MTU of Haystack's table: ``netblt send`` (its packets filling the MTU) and one
    Linux TCP connection (cubic, the kernel's default) across a gigabit veth pair; empty
    without root."""
    if os.geteuid():
        return {}
    size, runs = (8 << 20, 1) if quick else (256 << 20, SEEDS)
    out = {}
    with _data(size) as (source, received):
        for mtu in list(HAYSTACK_TCP)[-1 if quick else 0:]:
            packet = ["--packet-size", str(mtu - IP_UDP_HEADERS - DATA_HEADER_SIZE)]
            with VethPath(mtu) as path:
                out[mtu] = GigabitRuns(
                    [netblt_run(path, source, received, tuple(packet), tuple(packet), VETH_ADDRESSES)
                     for _ in range(runs)],
                    [tcp_run(path, "cubic", size, TCP_LIMIT, VETH_ADDRESSES) for _ in range(runs)])
    return out


def haystack_mtu(quick: bool) -> list[Compared]:
    """Throughput by MTU: Haystack's TCP, NETBLT in software and Linux TCP here, and the
    board's gateware at its GMII wires (1,500 bytes: its MAC's frames)."""
    runs, wire = gigabit_runs(quick), board_wire(quick)
    out = []
    for mtu, theirs in HAYSTACK_TCP.items():
        got = runs.get(mtu)
        ours = [receiver["steady_state_mbps"] for _, receiver in got.netblt] if got else []
        board = [row["goodput_mbps"] for row in wire["transmit"]
                 if row["payload"] + IP_HEADER + DATA_HEADER_SIZE == mtu]
        out.append(Compared(f"{mtu}-byte MTU", mtu, [theirs], ours,
                            {"Linux TCP (cubic)": [r.mbps for r in got.tcp] if got else [],
                             "NETBLT, the board's gateware (GMII)": board}))
    return out


def haystack_cpu(quick: bool) -> list[Compared]:
    """CPU load by MTU, sending and receiving: Haystack's two workstations at 9,000 bytes,
    NETBLT in software and Linux TCP here (a share of one core, over the transfer)."""
    out = []
    for mtu, got in gigabit_runs(quick).items():
        for role in ("sending", "receiving"):
            side = 0 if role == "sending" else 1
            theirs = list(HAYSTACK_CPU[role]) if mtu == 9000 else []
            ours = [100 * report["cpu_seconds"] / report["seconds"] for report in (r[side] for r in got.netblt)]
            tcp_cpu = [100 * (r.sender_cpu if side == 0 else r.receiver_cpu) for r in got.tcp]
            out.append(Compared(f"{mtu}-byte MTU, {role}", mtu + (0 if side == 0 else 150), theirs, ours,
                                {"Linux TCP (cubic)": tcp_cpu}))
    return out


RIG_PPS = {64: 2940, 128: 2940, 512: 2222, 1024: 1162, 1518: 806}
"""The RIG report's table 1: packets a second a RIG forwarded without loss between two
10 Mb/s Ethernets (no filters), by frame size (its "1500" is the IP packet: 1,518 on the wire)."""
RIG_PAYLOADS = {64: 4, 128: 64, 512: 448, 1024: 960, 1518: 1456}
"""NETBLT data bytes in a DATA frame of about each size, natively over IP (62 bytes of
headers and FCS; packets a multiple of 4 bytes, the smallest 66 on the wire)."""


@functools.cache
def board_wire(quick: bool) -> dict:
    """The gateware (the design the tests simulate: LiteEth on GMII, the engine at its
    clock) under Verilator: DATA sent unpaced and DATA received back to back at the
    minimum gap, for RIG's frame sizes (bench/ethernet_bench_tb.py)."""
    chosen = design(None)
    sizes = list(RIG_PAYLOADS.values())[-2 if quick else 0:]
    with tempfile.TemporaryDirectory(prefix="netblt-reproduce-") as folder:
        results = Path(folder) / "wire.json"
        env = {"NETBLT_BENCH_RESULTS": str(results), "NETBLT_BENCH_CASES": ",".join(f"{n}:ip" for n in sizes),
               "NETBLT_TB_CLOCK_HZ": str(chosen.config.clock_hz), "NETBLT_TB_SLOT_BYTES": str(chosen.config.slot_bytes),
               "NETBLT_BENCH_PACKETS": "8" if quick else "64"}
        runner = hdl.build(chosen.node, chosen.name, chosen.sources)
        hdl.run(runner, chosen.name, "netblt.bench.ethernet_bench_tb", Path(__file__).parent,
                testcase=["bench_transmit", "bench_receive"], env=env)
        return json.loads(results.read_text())


def rig_forwarding(quick: bool) -> list[Compared]:
    """Loss-free packets a second by frame size: the RIG between 10 Mb/s Ethernets, the
    gateware's receive path at gigabit's minimum gap (frames it took over the time they took
    on the wire; every one, or the row says how many it lost)."""
    by_payload = {row["payload"]: row for row in board_wire(quick)["receive"]}
    out = []
    for size, payload in RIG_PAYLOADS.items():
        if (row := by_payload.get(payload)) is None:
            continue
        pps = row["accepted"] / (row["sent_ns"] / 1e9)
        lost = f", {row['frames'] - row['accepted']} of {row['frames']} lost" if row["accepted"] < row["frames"] else ""
        out.append(Compared(f"{size} B ({row['frame_bytes']} B frames){lost}", size, [RIG_PPS[size]], [pps],
                            {"10 Mb/s Ethernet's most": [1.25e6 / (size + 20)],
                             "gigabit's most": [125e6 / (row["frame_bytes"] + 20)]}))
    return out


REALTIME_RUNS = 1
"""Runs of each protocol a setting through the TUN relay, in real time (a full reproduction
stays within 15 minutes)."""
TCP_LIMIT = 10.0
"""Seconds a TCP run may take: loss holds reno and cubic to a trickle on a long path."""


@dataclass(frozen=True)
class Study:
    name: str
    year: int
    """The report's."""
    title: str
    unit: str
    x_label: str
    run: Callable[[bool], list[Compared]]
    note: str
    y_label: str = "steady-state throughput (Mb/s)"
    limit: tuple[str, Callable[[float], float]] | None = None
    """What bounds the figure at each x, drawn as a line: its label and value."""
    log: bool = False
    """A logarithmic y axis (figures three orders of magnitude apart)."""


STUDIES = (
    Study("rfc1030_wideband", 1987, "RFC 1030, appendix IV: NETBLT over the Wideband satellite channel", "Mb/s",
          "burst interval (ms), 5 packets a burst", rfc1030_wideband,
          "Ours: netblt's protocol cores in virtual time on the same settings, over a 1.8 s round trip at "
          "1.045 Mb/s with 20 ms of jitter, losing each setting's share of packets as the report did; "
          "and, as root, one `netblt send` a setting through the same path in real time (`netblt netem "
          "--tun`'s relay between two network namespaces). "
          "The report's ends were a PC/AT and a SUN-3 that dropped packets of their own (15-20% on the "
          "PC at first, its section 6). With packets of 1,434 bytes and more the report's ends resent many "
          "times what they lost (the gateways' MTU, it seems), which our path does not model. RFC 1030's "
          "steady state runs from the first buffer's arrival to the start of the last; on transfers of 50 "
          "buffers it can come out above the burst rate when the first buffer was late.",
          limit=("the burst rate (1,432-byte packets), at most the channel's 1.045 Mb/s",
                 lambda interval: min(5 * 1432 * 8 / interval / 1000, WIDEBAND.rate_bps / 1e6))),
    Study("rfc1030_token_ring", 1987, "RFC 1030, appendix II: NETBLT between two PC/ATs on a Proteon token ring",
          "Mb/s", "burst interval (ms), 5 packets a burst", lambda quick: rfc1030_lan(RFC1030_TOKEN_RING, TOKEN_RING_PC,
                                                                                 quick),
          "The report's PC/ATs, not its 10 Mb/s ring, bound these transfers: a PC sent a 1,990-byte packet in "
          "8 ms and received one in 8 (its section 4), 1.99 Mb/s. Ours: netblt's protocol cores in virtual time on the "
          "same settings (1.4-2 MB), the sender's copying as the path's bottleneck (8 ms a 1,990-byte packet, in "
          "proportion for 1,438), the receiver's 8 ms for the last packet as the path's delay, and 3 ms for a "
          "control message on the way back (section 5: the 2-3 ms gap control messages force between bursts); "
          "as root, the first setting of each packet size and buffer count again in real time through the same "
          "path (`netblt netem --tun`'s relay). "
          "Ours does nothing else while it sends, so it comes out 4-22% above the PCs; the shape (one buffer "
          "lock-step below two, the burst interval mattering little "
          "until bursts outlast the PC) is the report's.",
          limit=("a PC/AT's own speed, 1.99 Mb/s (section 4)", lambda interval: TOKEN_RING_PC.mbps)),
    Study("rfc1030_ethernet", 1987, "RFC 1030, appendix III: NETBLT between two PC/ATs on an Ethernet", "Mb/s",
          "burst interval (ms), 5 packets a burst", lambda quick: rfc1030_lan(RFC1030_ETHERNET, ETHERNET_PC, quick),
          "MIT's busy Ethernet and the 3C500 interfaces, which hold one packet and go deaf while sending, lost "
          "packets, a fifth of them with two buffers outstanding (the receiver's OKs collided with DATA). Ours: "
          "as for the token ring, at the report's Ethernet timings (1,438 bytes sent in 6.0 ms, received in "
          "6.1: 1.92 Mb/s), losing each setting's share of DATA at random. Where the report lost little, ours "
          "is within 5%; with 512-byte packets the PCs' fixed cost a packet, which section 4 does not give "
          "and our per-byte model leaves out, made theirs slower. Where 3% and more was lost, ours falls to "
          "0.67-0.84 of theirs: each repair waits for a data timer of at least four burst intervals, which "
          "on a path this short is most of a buffer's time. Until this study, "
          "the mean gap between packets counted the wait for a resend, the timers grew with each repair, and "
          "a 1.4 MB transfer at 20% loss did not finish in ten minutes (driver/receive_buffers.py).",
          limit=("a PC/AT's own speed, 1.92 Mb/s (section 4)", lambda interval: ETHERNET_PC.mbps)),
    Study("keck_acts", 1998, "Keck remote observing: Hawaii to Caltech over the ACTS satellite (DS-3)", "Mb/s",
          "data outstanding (MB)", keck_acts,
          "The report's ttcp over TCP reached about 15 Mb/s with the 1 MB window SunOS allowed, a third of "
          f"the 39 Mb/s of data its DS-3 carries; it puts the window the path needs at 3 MB. Ours: netblt's "
          f"protocol cores in virtual time over a {KECK_RTT} s round trip (what the report's 1 MB and 15 Mb/s imply) "
          "at 39 Mb/s, with as much data outstanding (buffers of 256 KiB), memory to memory, 24 MiB, from "
          "the opening to the last byte. NETBLT's outstanding buffers bound it as TCP's window bounds TCP; "
          "its rate does not halve on a loss, which this clean path does not show (the report's bit-error "
          "figures are in a plot we do not have).",
          y_label="throughput, memory to memory (Mb/s)",
          limit=("what the outstanding data allows in a round trip, at most 39 Mb/s",
                 lambda megabytes: min(megabytes * 8.39 / KECK_RTT, 39.0))),
    Study("rig_hops", 1991, "NASA's RIG report: file transfer across one and two T1 satellite hops", "Mb/s",
          "satellite hops", rig_hops,
          "The report moved 10 MB files between NASA centres with mftp, several TCP connections at once, "
          "across T1 satellite circuits: at best about 130 KB/s over one hop, and 50 KB/s over two, where "
          "20 connections of 16 KB windows should have filled the path's 210 KB; its RIG routers dropped "
          "packets. Ours: `netblt send` with 64 KiB buffers (eight outstanding, its rate chosen as it goes) "
          "and one Linux TCP connection of each congestion control, through `netblt netem --tun` at 1.536 "
          "Mb/s with 0.27 s each way a hop and a 100 KB queue, 2 MiB each, from the opening to the last "
          "byte (TCP from its first byte). One run each.",
          y_label="throughput (Mb/s)", limit=("the T1's 1.536 Mb/s", lambda hops: T1 / 1e6)),
    Study("keck_ber", 1998, "Keck's ACTS path as the bit error rate rises: NETBLT and Linux TCP", "Mb/s",
          "bit error rate (log10; -8 is none)", keck_ber,
          "The Keck report found its TCP's throughput fell steeply with the bit error rate of its microwave "
          "links, and recovered once they were replaced by fibre; its figures are in a plot we do not "
          "have, so this table has no report column to compare. Ours: `netblt send` (256 KiB buffers, 16 "
          "outstanding) and Linux TCP through `netblt netem --tun` on the Keck path above (39 Mb/s, 0.56 s "
          "round trip, 4 MB queue), each 1,500-byte packet lost with the chance that one of its bits is "
          "wrong, 8 MiB each, a TCP run stopped after 10 s. One run each.",
          y_label="throughput (Mb/s)", limit=("the DS-3's 39 Mb/s of data", lambda ber: 39.0)),
    Study("haystack_mtu", 2001, "Haystack's e-VLBI memo: throughput against MTU on gigabit Ethernet", "Mb/s",
          "MTU (bytes)", haystack_mtu,
          "Haystack measured TCP (iperf, Linux 2.4, 15 minutes) between two Pentium III workstations joined "
          "by fibre: 990 Mb/s at 9,000 bytes, 981 at 4,500, 704 at 1,500, where its equation 1 allows 949. "
          "Ours: `netblt send` (its packets filling the MTU, its rate chosen as it goes) and one Linux TCP "
          "connection (cubic) between two network namespaces joined by a veth pair at each MTU, each way "
          "held to a gigabit by a token bucket (`tc tbf`), 256 MiB a run, three runs, NETBLT's steady "
          "state and TCP's first byte to last; and the board's gateware sending unpaced at its GMII wires "
          "under Verilator (the design the tests simulate: its MAC takes 1,500-byte frames, so one row).",
          y_label="throughput (Mb/s)",
          limit=("Haystack's equation 1: (MTU - 40) / (MTU + 38) of a gigabit",
                 lambda mtu: (mtu - 40) / (mtu + 38) * 1000)),
    Study("haystack_cpu", 2001, "Haystack's e-VLBI memo: CPU load sending and receiving on gigabit Ethernet", "%",
          "MTU (bytes; receiving drawn 150 to the right)", haystack_cpu,
          "Haystack gives its two workstations' CPU load at 9,000 bytes only: 57% and 98% sending (a 1.13 and "
          "a 1.0 GHz Pentium III), 43% and 60% receiving. Ours: the same runs as the table above, each end's "
          "CPU seconds over its transfer's seconds (a share of one core of this machine). NETBLT's sender "
          "also reads the file and computes its SHA-256 (about 0.6 s a GB), and its receiver writes the file; "
          "TCP's ends only move bytes between memory and the socket.",
          y_label="CPU load (% of one core)"),
    Study("rig_forwarding", 1991, "NASA's RIG report: packets a second forwarded without loss, by frame size",
          "packets/s", "frame size (bytes)", rig_forwarding,
          "The RIG, a pre-production router of 1991, forwarded between two 10 Mb/s Ethernets at most 2,940 "
          "small packets a second without loss (its table 1, no filters), against 14,880 the wire allows. "
          "Ours: the gateware's receive path (LiteEth on GMII and the engine at its clock, under Verilator: "
          "the design the tests simulate), DATA frames of each size sent back to back at gigabit's minimum "
          "gap into posted slots; packets a second are the frames it took over the time they took on the "
          "wire. A frame that does not hold a whole NETBLT packet is not a DATA frame, so the smallest is "
          "66 bytes.",
          y_label="packets a second, no loss", log=True),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netblt.bench.reproduce", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="each setting once: the pipeline, for make test")
    parser.add_argument("--out", type=Path, default=ROOT / "docs",
                        help="where reproduce.md and figures/ go (default: docs/)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # ends as Ctrl-C does: the namespaces go
    console = Console(width=140)
    sections = [_header(args.quick)]
    for study in STUDIES:
        started = time.monotonic()
        console.print(f"{study.title} ...", style="dim")
        try:
            compared = study.run(args.quick)
        except (TunError, RuntimeError) as exc:  # namespaces left by a killed run, a transfer or simulation failed
            print(f"reproduce: {study.name}: {exc}", file=sys.stderr)
            return 1
        if not compared:
            sections.append(f"## {study.title}\n\nNot run: it needs root (network namespaces).")
            console.print("  not run: it needs root (network namespaces)", style="dim")
            continue
        console.print(_table(study, compared))
        figure = _draw(study, compared, args.out / "figures")
        sections.append(_markdown(study, compared, figure.relative_to(args.out)))
        console.print(f"  {figure} ({time.monotonic() - started:.0f} s)", style="dim")
    (args.out / "reproduce.md").write_text("\n\n".join(sections) + "\n")
    console.print(f"wrote {args.out / 'reproduce.md'}")
    return 0


def _header(quick: bool) -> str:
    made = "python -m netblt.bench.reproduce" + (" --quick" if quick else "")
    return ("# The seed reports, reproduced\n\n"
            f"Made by `{made}` (`make reproduce`) on {time.strftime('%Y-%m-%d')}, {platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}"
            + (" (quick: one run a setting)" if quick else "") + ". "
            "Each table puts the report's figure (the median of its repeats), ours (the median of our "
            "runs) and ours over theirs side by side.")


def _columns(study: Study, compared: list[Compared]) -> list[str]:
    others = list(compared[0].others)
    return ["setting", f"report, {study.unit}", f"netblt, {study.unit}", "ratio",
            *(f"{o}, {study.unit}" for o in others)]


def _cells(c: Compared) -> list[str]:
    return [c.label, _shown(c.theirs), _shown(c.ours), "-" if c.ratio is None else f"{c.ratio:.2f}",
            *(_shown(values) for values in c.others.values())]


def _table(study: Study, compared: list[Compared]) -> Table:
    table = Table(title=study.title)
    for column in _columns(study, compared):
        table.add_column(column, justify="left" if column == "setting" else "right")
    for c in compared:
        table.add_row(*_cells(c))
    return table


def _shown(values: list[float]) -> str:
    if not values:
        return "-"
    spread = f" ({min(values):.3f}-{max(values):.3f})" if max(values) - min(values) >= 0.0005 else ""
    return f"{statistics.median(values):.3f}{spread}"


def _markdown(study: Study, compared: list[Compared], figure: Path) -> str:
    columns = _columns(study, compared)
    lines = [f"## {study.title}", "", study.note, "", "| " + " | ".join(columns) + " |",
             "| --- |" + " ---: |" * (len(columns) - 1)]
    lines += ["| " + " | ".join(_cells(c)) + " |" for c in compared]
    return "\n".join(lines + ["", f"![{study.title}]({figure})"])


def _draw(study: Study, compared: list[Compared], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 4.2))
    series = [(lambda c: c.theirs, f"the report ({study.year})", "o"), (lambda c: c.ours, "netblt", "x")]
    series += [(lambda c, name=name: c.others[name], name, marker)
               for name, marker in zip(compared[0].others, "^vs")]
    for values, label, marker in series:
        xs = [c.x for c in compared for _ in values(c)]
        if xs:
            axes.scatter(xs, [v for c in compared for v in values(c)], label=label, marker=marker)
    if study.limit:
        label, limit = study.limit
        xs = sorted({c.x for c in compared})
        xs = [xs[0] + (xs[-1] - xs[0]) * i / 100 for i in range(101)]
        axes.plot(xs, [limit(x) for x in xs], color="grey", linewidth=1, label=label)
    if study.log:
        axes.set_yscale("log")
    axes.set_xlabel(study.x_label)
    axes.set_ylabel(study.y_label)
    axes.set_title(study.title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend()
    axes.text(0.0, -0.2, f"python -m netblt.bench.reproduce; {platform.machine()}, {os.cpu_count()} cores",
              transform=axes.transAxes, fontsize=7, color="grey")
    figure.tight_layout()
    path = folder / f"{study.name}.svg"
    figure.savefig(path, metadata={"Date": None})
    plt.close(figure)
    return path


if __name__ == "__main__":
    sys.exit(main())
