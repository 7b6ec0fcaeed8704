"""A one-way WAN path model: rate limit with a finite queue, delay, jitter, loss, burst
loss, reordering, duplication and corruption; seeded, so a run can be replayed.

The model only decides what happens to each datagram and when it arrives; the
virtual-time simulation and the real UDP relay both use it, each with its own clock.
"""

from __future__ import annotations

import heapq
import itertools
import random
import selectors
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

LATE = 0.002
"""A relay this late to deliver what is due (its host busy) stalled its paths."""


@dataclass(frozen=True)
class PathConfig:
    delay: float = 0.0
    """One-way propagation delay, seconds."""
    jitter: float = 0.0
    """Extra delay, uniform in [0, jitter) seconds; enough of it reorders packets."""
    loss: float = 0.0
    """Independent loss probability per datagram."""
    burst_loss: float = 0.0
    """Probability per datagram that a loss burst starts (Gilbert model)."""
    burst_length: float = 4.0
    """Mean datagrams lost per burst."""
    reorder: float = 0.0
    """Probability that a datagram is held back by ``reorder_delay``."""
    reorder_delay: float = 0.002
    duplicate: float = 0.0
    corrupt: float = 0.0
    """Probability that one random bit of a datagram is flipped."""
    rate_bps: float = 0.0
    """Bottleneck rate in bits per second; 0 means unlimited."""
    queue_bytes: int = 1 << 20
    """Bottleneck queue; a datagram that does not fit is dropped."""
    rate_changes: tuple[tuple[float, float], ...] = ()
    """(seconds after the first datagram, new bottleneck rate), in time order: a path
    whose capacity changes during a transfer."""


class Path:
    def __init__(self, config: PathConfig, seed: int = 0) -> None:
        self.config = config
        self.random = random.Random(seed)
        self.busy_until = 0.0
        self.in_burst = False
        self.counts: Counter[str] = Counter()
        self.started: float | None = None

    def send(self, datagram: bytes, now: float) -> list[tuple[float, bytes]]:
        """When and what arrives at the far end for one datagram sent at ``now``."""
        c, rnd = self.config, self.random
        self.counts["sent"] += 1
        depart = now
        if (rate := self.rate(now)):
            backlog = max(0.0, self.busy_until - now) * rate / 8
            if backlog + len(datagram) > c.queue_bytes:
                self.counts["queue drop"] += 1
                return []
            depart = max(now, self.busy_until) + len(datagram) * 8 / rate
            self.busy_until = depart
        if self._lost():
            self.counts["lost"] += 1
            return []
        copies = [datagram]
        if c.duplicate and rnd.random() < c.duplicate:
            self.counts["duplicated"] += 1
            copies.append(datagram)
        out = []
        for copy in copies:
            if c.corrupt and rnd.random() < c.corrupt and copy:
                self.counts["corrupted"] += 1
                bit = rnd.randrange(len(copy) * 8)
                mutable = bytearray(copy)
                mutable[bit // 8] ^= 1 << (bit % 8)
                copy = bytes(mutable)
            at = depart + c.delay + (rnd.random() * c.jitter if c.jitter else 0.0)
            if c.reorder and rnd.random() < c.reorder:
                self.counts["reordered"] += 1
                at += c.reorder_delay
            out.append((at, copy))
        self.counts["delivered"] += len(out)
        return out

    def rate(self, now: float) -> float:
        """The bottleneck's rate at ``now`` (0: unlimited)."""
        if self.started is None:
            self.started = now
        rate = self.config.rate_bps
        for at, changed in self.config.rate_changes:
            if now - self.started >= at:
                rate = changed
        return rate

    def _lost(self) -> bool:
        c, rnd = self.config, self.random
        if c.burst_loss:
            if self.in_burst:
                self.in_burst = rnd.random() >= 1 / max(1.0, c.burst_length)
                if self.in_burst:
                    return True
            elif rnd.random() < c.burst_loss:
                self.in_burst = True
                return True
        return bool(c.loss) and rnd.random() < c.loss


class InFlight(Generic[T]):
    """What a relay's paths hold, in arrival order, on the real clock. A relay that runs
    LATE or more stalls its paths, as a link that stops: what they hold goes out that much
    later, as spaced as before, and the bottlenecks' queues with it. Sent all at once, it
    would pass faster than the bottleneck, and a receiver timing its arrivals would read a
    faster path than the one asked for."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = paths
        self.stalls = 0
        self.stalled = 0.0
        """Seconds the paths stood still in all."""
        self._heap: list[tuple[float, int, T]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, when: float, item: T) -> None:
        heapq.heappush(self._heap, (when, next(self._order), item))

    def wait(self, now: float, most: float = 0.05) -> float:
        """Seconds a relay may sleep from ``now``: until the next item is due, and at most
        ``most`` (when it looks at its stop condition again)."""
        return max(0.0, min(most, self._heap[0][0] - now)) if self._heap else most

    def times(self) -> list[float]:
        """When each item held is due, soonest first."""
        return sorted(when for when, _, _ in self._heap)

    def due(self, now: float) -> list[T]:
        """The items due by ``now``, in order."""
        if self._heap and (lag := now - self._heap[0][0]) > LATE:
            self._heap = [(when + lag, order, item) for when, order, item in self._heap]  # all alike: still a heap
            for path in self.paths:
                path.busy_until += lag
            self.stalls, self.stalled = self.stalls + 1, self.stalled + lag
        out = []
        while self._heap and self._heap[0][0] <= now:
            out.append(heapq.heappop(self._heap)[2])
        return out


def precise_selector() -> selectors.BaseSelector:
    """A selector for a relay's loop, its timeout kept to the microsecond (select(2)'s
    timeval). epoll's is rounded up to a millisecond: a 20 Mb/s path's packets, due 0.6 ms
    apart, went out in clumps, and a receiver timing a 16 KiB buffer's arrivals read the
    path at 15.8-24.6 Mb/s (with this, mostly 20.9-21.1). select(2) takes descriptors
    below 1024: a relay has two of its own."""
    return selectors.SelectSelector()


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
