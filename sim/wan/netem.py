"""A one-way WAN path model: rate limit with a finite queue, delay, jitter, loss, burst
loss, reordering, duplication and corruption; seeded, so a run can be replayed.

The model only decides what happens to each datagram and when it arrives; the
virtual-time simulation and the real UDP relay both use it, each with its own clock.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass


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
