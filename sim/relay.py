"""A UDP relay between two real endpoints that applies a :class:`Path` in each direction.

The sender talks to ``--listen``; the relay forwards to ``--forward`` from a socket of
its own and carries the replies back to whoever last sent from the listening side.
The kernel here has no netem qdisc, so the WAN is emulated in user space.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import re
import selectors
import signal
import socket
import threading
import time
from dataclasses import dataclass

from .netem import Path, PathConfig

BATCH = 64
"""Datagrams read from one socket before looking at the clock again."""


def parse_seconds(text: str) -> float:
    """``200ms``, ``1.5s``, ``30us`` or plain seconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(us|ms|s)?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"bad duration {text!r}: use e.g. 200ms or 1.5s")
    return float(match.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0}[match.group(2)]


def _probability(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad probability {text!r}: use e.g. 0.05 or 5%") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"probability {text!r} is outside 0..1")
    return value


@dataclass
class RelayStats:
    forward: Path
    backward: Path


class Relay:
    def __init__(self, listen: tuple[str, int], forward: tuple[str, int], config: PathConfig,
                 backward: PathConfig | None = None, seed: int = 1) -> None:
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(listen)
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind((listen[0], 0))
        for sock in (self.front, self.back):
            sock.setblocking(False)
            for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                sock.setsockopt(socket.SOL_SOCKET, option, 8 << 20)
        self.address = self.front.getsockname()
        self.target = forward
        self.client: tuple[str, int] | None = None
        self.stats = RelayStats(Path(config, seed), Path(backward or config, seed + 1))
        self._queue: list[tuple[float, int, socket.socket, bytes, tuple[str, int]]] = []
        self._order = itertools.count()
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self, duration: float = 0.0) -> None:
        """Relay until :meth:`stop` or for ``duration`` seconds (0: until stopped)."""
        selector = selectors.DefaultSelector()
        selector.register(self.front, selectors.EVENT_READ)
        selector.register(self.back, selectors.EVENT_READ)
        end = time.monotonic() + duration if duration else float("inf")
        try:
            while not self._stop.is_set() and time.monotonic() < end:
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
                self.client = source
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", required=True, metavar="ADDR:PORT", help="where the sender sends")
    parser.add_argument("--forward", required=True, metavar="ADDR:PORT", help="the receiver")
    parser.add_argument("--delay", type=parse_seconds, default=0.0, help="one-way delay, each direction")
    parser.add_argument("--jitter", type=parse_seconds, default=0.0, help="extra random delay (reorders)")
    parser.add_argument("--loss", type=_probability, default=0.0, help="random loss, e.g. 0.05 or 5%%")
    parser.add_argument("--burst-loss", type=_probability, default=0.0, help="chance a loss burst starts")
    parser.add_argument("--burst-length", type=float, default=4.0, help="mean datagrams per loss burst")
    parser.add_argument("--reorder", type=_probability, default=0.0, help="chance a datagram is held back")
    parser.add_argument("--duplicate", type=_probability, default=0.0)
    parser.add_argument("--corrupt", type=_probability, default=0.0, help="chance one bit is flipped")
    parser.add_argument("--rate", type=float, default=0.0, help="bottleneck in bits/s (0: none)")
    parser.add_argument("--queue", type=int, default=1 << 20, help="bottleneck queue in bytes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration", type=parse_seconds, default=0.0, help="stop after this long (0: Ctrl-C)")


def run_from_args(args: argparse.Namespace) -> int:
    from netblt.driver.transport import TransportError, parse_address
    config = PathConfig(delay=args.delay, jitter=args.jitter, loss=args.loss, burst_loss=args.burst_loss,
                        burst_length=args.burst_length, reorder=args.reorder, duplicate=args.duplicate,
                        corrupt=args.corrupt, rate_bps=args.rate, queue_bytes=args.queue)
    try:
        relay = Relay(parse_address(args.listen), parse_address(args.forward), config, seed=args.seed)
    except (OSError, TransportError) as exc:
        print(f"netblt netem: error: {exc}")
        return 1
    print(f"netblt netem: {relay.address[0]}:{relay.address[1]} -> {args.forward}  {config}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: relay.stop())
    try:
        relay.run(args.duration)
    except KeyboardInterrupt:
        pass
    for name, path in (("forward", relay.stats.forward), ("backward", relay.stats.backward)):
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(path.counts.items())), flush=True)
    return 0
