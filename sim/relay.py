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

from netblt.driver.transport import GSO_MAX_BYTES, GSO_MAX_SEGMENTS, Address, Transport
from netblt.host.units import parse_duration, parse_probability, parse_rate, parse_size

from .netem import Path, PathConfig, describe

BATCH = 64
"""Reads from one socket (each up to 64 datagrams the kernel coalesced) before looking at
the clock again."""


@dataclass
class RelayStats:
    forward: Path
    backward: Path


class Relay:
    """Datagrams are read and sent in batches (segmentation offload, as the software data
    path does); each one still meets the path model on its own."""

    def __init__(self, listen: Address, forward: Address, config: PathConfig,
                 backward: PathConfig | None = None, seed: int = 1) -> None:
        self.front = Transport("udp", listen)
        self.back = Transport("udp", ("", 0), family=_family(forward[0]))
        for transport in (self.front, self.back):
            transport.sock.setblocking(False)
        self.address = self.front.sock.getsockname()[:2]
        self.target = forward
        self.client: Address | None = None
        self.stats = RelayStats(Path(config, seed), Path(backward or config, seed + 1))
        self._queue: list[tuple[float, int, Transport, bytes, Address]] = []
        self._order = itertools.count()
        self._buf = bytearray(1 << 16)

    def run(self, duration: float = 0.0) -> None:
        """Relay for ``duration`` seconds (0: until interrupted)."""
        selector = selectors.DefaultSelector()
        selector.register(self.front.sock, selectors.EVENT_READ, self.front)
        selector.register(self.back.sock, selectors.EVENT_READ, self.back)
        end = time.monotonic() + duration if duration else float("inf")
        try:
            while time.monotonic() < end:
                now = time.monotonic()
                self._deliver(now)
                wait = min(0.05, self._queue[0][0] - now) if self._queue else 0.05
                for key, _ in selector.select(max(0.0, wait)):
                    self._read(key.data, time.monotonic())
        finally:
            selector.close()
            self.front.close()
            self.back.close()

    def _read(self, transport: Transport, now: float) -> None:
        due: list[tuple[Transport, bytes, Address]] = []
        for _ in range(BATCH):
            try:
                view, segment, source = transport.receive(self._buf)
            except OSError:
                transport.errors()  # the far end went away: what it was sent is lost, as on a real path
                continue
            if source is None:
                break
            if transport is self.front:
                self.client = source
                path, out, dest = self.stats.forward, self.back, self.target
            elif self.client is not None:
                path, out, dest = self.stats.backward, self.front, self.client
            else:
                continue
            segment = segment or len(view)
            for at in range(0, len(view), segment) if segment else (0,):
                for when, copy in path.send(bytes(view[at:at + segment]), now):
                    if when <= now and not self._queue:
                        due.append((out, copy, dest))
                    else:
                        heapq.heappush(self._queue, (when, next(self._order), out, copy, dest))
        _send(due)
        self._deliver(time.monotonic())

    def _deliver(self, now: float) -> None:
        due = []
        while self._queue and self._queue[0][0] <= now:
            _, _, out, datagram, dest = heapq.heappop(self._queue)
            due.append((out, datagram, dest))
        _send(due)


def _send(due: list[tuple[Transport, bytes, Address]]) -> None:
    """Send in order, runs of equal-sized datagrams to one place in one system call each."""
    start = 0
    while start < len(due):
        out, first, dest = due[start]
        end, total = start + 1, len(first)
        while first and end < len(due) and end - start < GSO_MAX_SEGMENTS:
            then, datagram, to = due[end]
            if then is not out or to != dest or len(datagram) > len(first) or total + len(datagram) > GSO_MAX_BYTES:
                break
            total += len(datagram)
            end += 1
            if len(datagram) < len(first):
                break  # a shorter one ends a run
        try:
            out.send_segments(memoryview(b"".join(d for _, d, _ in due[start:end])), len(first) or 1, dest)
        except OSError:
            out.errors()  # the far end went away: the datagrams are lost, as on a real path
        start = end


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", metavar="ADDR:PORT", help="where the sender sends")
    parser.add_argument("--forward", metavar="ADDR:PORT", help="the receiver")
    parser.add_argument("--tun", metavar="NAME", help="instead of relaying UDP: create network namespaces "
                        "NAME-a (10.77.0.1) and NAME-b (10.77.0.2) joined through the path, for any IP "
                        "traffic (TCP, NETBLT over UDP or IP protocol 30); needs root")
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


def run_from_args(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    from netblt.driver.transport import TransportError, parse_address, show
    config = PathConfig(delay=args.delay, jitter=args.jitter, loss=args.loss, burst_loss=args.burst_loss,
                        burst_length=args.burst_length, reorder=args.reorder, duplicate=args.duplicate,
                        corrupt=args.corrupt, rate_bps=args.rate, queue_bytes=args.queue)
    if args.tun:
        if args.listen or args.forward:
            print("netblt netem: error: --tun takes no --listen or --forward", file=sys.stderr)
            return 2
        return _run_tun(args, config)
    if not (args.listen and args.forward):
        print("netblt netem: error: give --listen and --forward (or --tun NAME)", file=sys.stderr)
        return 2
    try:
        listen, forward = parse_address(args.listen), parse_address(args.forward)
    except TransportError as exc:
        print(f"netblt netem: error: {exc}", file=sys.stderr)
        return 2
    try:
        relay = Relay(listen, forward, config, seed=args.seed)
    except TransportError as exc:
        print(f"netblt netem: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"netblt netem: error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"netblt netem: {show(relay.address)} -> {show(forward)}: {describe(config)}", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # ends the run as Ctrl-C does: no lock taken
    try:
        relay.run(args.duration)
    except KeyboardInterrupt:
        pass
    _print_counts(relay.stats.forward, relay.stats.backward)
    return 0


def _run_tun(args: argparse.Namespace, config: PathConfig) -> int:
    from .tun_path import ADDRESSES, TunPath
    tun = TunPath(config, config, name=args.tun, seed=args.seed)
    try:
        tun.__enter__()
    except OSError as exc:
        print(f"netblt netem: error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    (a, b), end = tun.names, time.monotonic() + args.duration if args.duration else float("inf")
    print(f"netblt netem: namespace {a} ({ADDRESSES[0]}) <-> {b} ({ADDRESSES[1]}): {describe(config)}; "
          f"run programs there with: ip netns exec {a} COMMAND", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        tun.run(end)
    except KeyboardInterrupt:
        pass
    finally:
        tun.close()
    _print_counts(*tun.paths)
    return 0


def _print_counts(forward: Path, backward: Path) -> None:
    for name, path in (("forward", forward), ("backward", backward)):
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(path.counts.items())), flush=True)
