"""A UDP relay between two real endpoints that applies a :class:`Path` in each direction.

The sender talks to ``--listen``; the relay forwards to ``--forward`` from a socket of
its own and carries the replies back to whoever last sent from the listening side.
The kernel here has no netem qdisc, so the WAN is emulated in user space.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass

from netblt.host.units import parse_duration, parse_probability, parse_rate, parse_size

from .netem import Path, PathConfig

BATCH = 64
"""Datagrams read from one socket before looking at the clock again."""


@dataclass
class RelayStats:
    forward: Path
    backward: Path


class Relay:
    def __init__(self, listen: tuple[str, int], forward: tuple[str, int], config: PathConfig,
                 backward: PathConfig | None = None, seed: int = 1) -> None:
        self.front = socket.socket(_family(listen[0]), socket.SOCK_DGRAM)
        self.front.bind(listen)
        self.back = socket.socket(_family(forward[0]), socket.SOCK_DGRAM)
        self.back.bind(("::" if self.back.family == socket.AF_INET6 else "", 0))
        for sock in (self.front, self.back):
            sock.setblocking(False)
            for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                sock.setsockopt(socket.SOL_SOCKET, option, 8 << 20)
        self.address = self.front.getsockname()[:2]
        self.target = forward
        self.client: tuple[str, int] | None = None
        self.stats = RelayStats(Path(config, seed), Path(backward or config, seed + 1))
        self._queue: list[tuple[float, int, socket.socket, bytes, tuple[str, int]]] = []
        self._order = itertools.count()

    def run(self, duration: float = 0.0) -> None:
        """Relay for ``duration`` seconds (0: until interrupted)."""
        selector = selectors.DefaultSelector()
        selector.register(self.front, selectors.EVENT_READ)
        selector.register(self.back, selectors.EVENT_READ)
        end = time.monotonic() + duration if duration else float("inf")
        try:
            while time.monotonic() < end:
                now = time.monotonic()
                self._deliver(now)
                wait = min(0.05, self._queue[0][0] - now) if self._queue else 0.05
                for key, _ in selector.select(max(0.0, wait)):
                    self._read(key.fileobj, time.monotonic())
        finally:
            selector.close()
            self.front.close()
            self.back.close()

    def _read(self, sock: socket.socket, now: float) -> None:
        for _ in range(BATCH):
            try:
                datagram, source = sock.recvfrom(1 << 16)
            except (BlockingIOError, ConnectionRefusedError):
                return
            if sock is self.front:
                self.client = source[:2]
                path, out, dest = self.stats.forward, self.back, self.target
            elif self.client is not None:
                path, out, dest = self.stats.backward, self.front, self.client
            else:
                continue
            for at, copy in path.send(datagram, now):
                heapq.heappush(self._queue, (at, next(self._order), out, copy, dest))
        self._deliver(time.monotonic())

    def _deliver(self, now: float) -> None:
        while self._queue and self._queue[0][0] <= now:
            _, _, out, datagram, dest = heapq.heappop(self._queue)
            try:
                out.sendto(datagram, dest)
            except OSError:
                pass  # the far end went away: the datagram is lost, as on a real path


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", required=True, metavar="ADDR:PORT", help="where the sender sends")
    parser.add_argument("--forward", required=True, metavar="ADDR:PORT", help="the receiver")
    g = parser.add_argument_group("the path, applied in each direction")
    g.add_argument("--delay", type=parse_duration, default=0.0, metavar="TIME",
                   help="one-way delay, with a unit: 20ms, 0.3s (default: 0)")
    g.add_argument("--jitter", type=parse_duration, default=0.0, metavar="TIME",
                   help="extra random delay up to this, with a unit; enough of it reorders (default: 0)")
    g.add_argument("--loss", type=parse_probability, default=0.0, metavar="P",
                   help="random loss, e.g. 0.05 or 5%% (default: 0)")
    g.add_argument("--burst-loss", type=parse_probability, default=0.0, metavar="P",
                   help="chance per datagram that a loss burst starts (default: 0)")
    g.add_argument("--burst-length", type=float, default=4.0, metavar="N",
                   help="mean datagrams lost per burst (default: 4)")
    g.add_argument("--reorder", type=parse_probability, default=0.0, metavar="P",
                   help="chance a datagram is held back 2 ms (default: 0)")
    g.add_argument("--duplicate", type=parse_probability, default=0.0, metavar="P",
                   help="chance a datagram arrives twice (default: 0)")
    g.add_argument("--corrupt", type=parse_probability, default=0.0, metavar="P",
                   help="chance one bit of a datagram is flipped (default: 0)")
    g.add_argument("--rate", type=parse_rate, default=0.0, metavar="RATE",
                   help="bottleneck in bits/s, e.g. 100M (default: none)")
    g.add_argument("--queue", type=parse_size, default=1 << 20, metavar="BYTES",
                   help="bottleneck queue, e.g. 1M (default: 1M)")
    parser.add_argument("--seed", type=int, default=1, help="random seed: the same seed replays the "
                        "same losses (default: 1)")
    parser.add_argument("--duration", type=parse_duration, default=0.0, metavar="TIME",
                        help="stop after this long, e.g. 300s (default: run until Ctrl-C)")


def describe(config: PathConfig) -> str:
    """The path in words: only what is not the default."""
    parts = []
    if config.delay or config.jitter:
        parts.append(f"delay {config.delay * 1e3:g} ms" + (f" + up to {config.jitter * 1e3:g} ms jitter"
                                                            if config.jitter else ""))
    for name in ("loss", "burst_loss", "reorder", "duplicate", "corrupt"):
        if value := getattr(config, name):
            parts.append(f"{name.replace('_', ' ')} {value * 100:g}%")
    if config.burst_loss:
        parts.append(f"bursts of {config.burst_length:g}")
    if config.rate_bps:
        parts.append(f"rate {config.rate_bps / 1e6:g} Mb/s, queue {config.queue_bytes} bytes")
    return ", ".join(parts) or "no impairment"


def run_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    from netblt.driver.transport import TransportError, parse_address, show
    config = PathConfig(delay=args.delay, jitter=args.jitter, loss=args.loss, burst_loss=args.burst_loss,
                        burst_length=args.burst_length, reorder=args.reorder, duplicate=args.duplicate,
                        corrupt=args.corrupt, rate_bps=args.rate, queue_bytes=args.queue)
    try:
        listen, forward = parse_address(args.listen), parse_address(args.forward)
    except TransportError as exc:
        print(f"netblt netem: error: {exc}", file=sys.stderr)
        return 2
    try:
        relay = Relay(listen, forward, config, seed=args.seed)
    except OSError as exc:
        print(f"netblt netem: error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"netblt netem: {show(relay.address)} -> {show(forward)}: {describe(config)}", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # ends the run as Ctrl-C does: no lock taken
    try:
        relay.run(args.duration)
    except KeyboardInterrupt:
        pass
    for name, path in (("forward", relay.stats.forward), ("backward", relay.stats.backward)):
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(path.counts.items())), flush=True)
    return 0
