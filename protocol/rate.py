"""Receiver-driven rate selection: the rate each OK offers (docs/protocol.md, "Choosing the rate").

RFC 998 lets the receiver offer a new burst size and interval in every OK, and the
sender adopts the offer or a more restrictive one. The receiver sees what the path
delivers, so it chooses, as BBR does from delivery rates and as RBUDP and Tsunami let
the receiver set the pace. A sample is what arrived while buffers' first passes came
in, against the rate the sender was using for them:

- Delivered less (under LIMITED of the sending rate): the sender outran a bottleneck,
  whose rate is then what arrived (the queue in front of it drains at exactly that
  rate). Start-up ends, and the offer cycles around that rate: two buffers probing
  above it, two draining the queue the probe built, six at it.
- Delivered nearly all of it: the path carried what was sent, whatever was lost at
  random. In start-up the offer doubles; a probe that brought more than the bottleneck
  passes means the path is faster now, and start-up begins again.

What arrived counts every DATA packet of any buffer, resends included: with heavy loss
a first pass is spread thin between resends, but the path's delivery is all of it.
Bursts arrive with pauses between them when nothing queues, so a rate timed over k
bursts may be off by one interval in k+1: buffers sent at one rate are pooled until
they span SPAN intervals. Only buffers sent wholly at one rate count.

Losses alone never lower the rate: random loss leaves the delivered share near 1, and
congestion shows as a delivery rate below the sending rate before and while it drops.
A sample below the sending rate with nothing lost may be a queue filling or the
receiving host pausing; one alone changes nothing in start-up, and never lowers the
bottleneck measured.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .events import FirstPass
from .params import Params, burst_for_rate, burst_rate_bps

LIMITED = 0.9
"""A sample delivered at less than this share of its sending rate met a bottleneck."""
FASTER = 1.06
"""Delivered this much over the bottleneck's rate (by a probe), the path has got faster."""
STARTUP_GAIN = 2.0
UNCONFIRMED_GAIN = 1.25
"""In start-up, the offer after one limited sample with nothing lost, against what
arrived: a bottleneck not yet confirmed (BBR's probing gain: room for a noisy sample,
and a sender held to it overflows a queue slowly if the dip was real)."""
REGAIN = 1.5
"""The start-up gain when the path turns out faster than a bottleneck once measured."""
PROBE_GAINS = (1.125, 1.125, 0.875, 0.875, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
"""The offer against the bottleneck, sample by sample once it is known (BBR's ProbeBW
cycle, each step two samples long: an offer takes effect part way through a buffer)."""
OVERFLOW = 0.02
"""A first pass missing more than this share of its buffer lost packets to a queue
overflowing; less is the path's random loss, which says nothing about its rate."""
FILTER = 3
"""Samples over which the bottleneck is the highest delivery rate (BBR's max filter)."""
CONFIRM = 2
"""Limited samples in a row with nothing lost that count as a bottleneck."""
SPAN = 10
"""Burst intervals a sample spans at least."""
START_DIVISOR = 8
"""A sender choosing its rate automatically starts at this fraction of its cap..."""
START_BUFFER_TIME = 0.2
"""...or faster, so that its first buffer takes no longer than this: the first OK, and
with it the first measurement, comes after a whole buffer, which at an eighth of the
cap is seconds for buffers of many MB..."""
SMALL_START = 1 << 20
"""...unless its first START_WINDOW buffers hold no more than this: a bottleneck's
queue takes them whatever the rate."""
START_WINDOW = 2
"""Buffers a sender choosing its rate sends before its first OK (then all that are GO'd)."""
MIN_RESEND = 16
"""Packets a RESEND may always ask for, however few the path delivered."""


@dataclass
class _Pool:
    """Buffers sent at one rate, pooled into one sample."""

    sending_bps: float
    interval: float
    """The sender's burst interval, seconds."""
    bits: float = 0.0
    seconds: float = 0.0
    lost: bool = False


class RateSelector:
    """The rate a receiver offers, in bits/s, from what the path delivers."""

    def __init__(self, limit_bps: float) -> None:
        self.limit = limit_bps
        """The rate negotiated at set-up: never offered more."""
        self.startup = True
        self.bottleneck = 0.0
        """The slowest link's rate as last measured; 0 until a sample was limited."""
        self.fastest = 0.0
        """The highest rate the path carried since the bottleneck was last measured."""
        self.phase = 0
        self.queued = 0
        """Limited samples in a row with nothing lost."""
        self.offered: float | None = None
        """None until the first sample: the sender's own rate stands."""
        self.recent: deque[float] = deque(maxlen=FILTER)
        """The last few samples' delivery rates."""
        self.pool: _Pool | None = None

    def arrived(self, bits: float, seconds: float, sending_bps: float, interval: float, lost: bool) -> None:
        """``bits`` arrived in ``seconds`` while a buffer's first pass did, sent at
        ``sending_bps`` in bursts every ``interval`` seconds; ``lost``: some of it did not."""
        pool = self.pool
        if pool is None or pool.sending_bps != sending_bps:
            pool = self.pool = _Pool(sending_bps, interval)
        pool.bits, pool.seconds, pool.lost = pool.bits + bits, pool.seconds + seconds, pool.lost or lost
        # Before any offer the sender keeps its starting rate for every buffer it is GO'd:
        # a first pass delivered at half of it or less is a bottleneck however few bursts
        # it spans (a 10G sender's 512 KiB buffers are one burst each; its first OK offered
        # nothing and it sent 16 buffers at 10G into a gigabit's queue).
        first = self.offered is None and pool.seconds > 0 and pool.bits / pool.seconds < LIMITED * sending_bps / 2
        if first or pool.seconds >= SPAN * pool.interval:
            self.pool = None
            self._sample(pool.bits / pool.seconds, pool.sending_bps, pool.lost)

    def offer(self, sending_bps: float) -> float:
        """The rate to offer now; ``sending_bps`` is the sender's current rate."""
        return sending_bps if self.offered is None else self.offered

    def _sample(self, rate_bps: float, sending_bps: float, lost: bool) -> None:
        limited = rate_bps < LIMITED * sending_bps
        self.queued = self.queued + 1 if limited and not lost else 0
        self.recent.append(rate_bps)
        if limited and (lost or self.queued >= CONFIRM or not self.startup and rate_bps > self.bottleneck):
            # The most of the last few: one sample timed while the host was busy, or
            # thinned by random loss, does not pull the bottleneck down on its own.
            self.bottleneck = self.fastest = max(self.recent)
            if self.startup:
                # The cycle goes on at its second probe step, then drains: draining at once
                # was tried and cost the slow long paths 4-9% (docs/benchmarks.md, issue 68).
                self.startup, self.phase = False, 0
        elif not limited:
            if self.startup:
                self.fastest = max(self.fastest, sending_bps)
            else:
                self.fastest = max(self.fastest, min(sending_bps, rate_bps))
                if rate_bps > FASTER * self.bottleneck:
                    self.startup = True  # more arrived than the bottleneck passes: it is faster now
        elif self.startup:
            # One sample with nothing lost: a host's pause, or the first sight of a
            # bottleneck. Not yet measured, but the next buffers go little faster than
            # what arrived (a sender releases all it holds at its first OK's offer).
            self.offered = min(self.limit, UNCONFIRMED_GAIN * rate_bps, self.offer(sending_bps))
            return
        if self.startup:
            gain = REGAIN if self.bottleneck else STARTUP_GAIN
            self.offered = min(self.limit, gain * self.fastest)
        else:
            self.phase = (self.phase + 1) % len(PROBE_GAINS)
            self.offered = min(self.limit, PROBE_GAINS[self.phase] * max(self.bottleneck, self.fastest))


class BurstOffers:
    """The selector in the protocol's terms: a buffer's first pass at the sender's burst
    size and interval in, the burst size and interval an OK offers out, never more than
    negotiated (an older sender ignores what it cannot use)."""

    def __init__(self, params: Params) -> None:
        self.params = params
        self.selector = RateSelector(params.rate_bps)

    def first_pass(self, size: int, burst: tuple[int, int], first_pass: FirstPass) -> None:
        """A buffer of ``size`` bytes whose first pass came wholly at ``burst``."""
        self._arrived(size, burst, first_pass, 0.0, first_pass.spread)

    def changed_pass(self, size: int, before: tuple[int, int], after: tuple[int, int], first_pass: FirstPass,
                     since: float) -> None:
        """A buffer of ``size`` bytes whose first pass began at ``before`` and went on at
        ``after`` for its last ``since`` seconds. In start-up only, its part since is a
        sample at ``after``: each step of start-up then takes a buffer, not two (the offer
        comes in the OK of one buffer, while the next is on its way). The part before is
        taken as delivered at ``before``, which start-up's last sample said the path carries."""
        if self.selector.startup and 0 < since < first_pass.spread:
            early = burst_rate_bps(*before, self.params.packet_size) * (first_pass.spread - since)
            self._arrived(size, after, first_pass, early, since)

    def _arrived(self, size: int, burst: tuple[int, int], first_pass: FirstPass, early: float,
                 seconds: float) -> None:
        """What arrived in the last ``seconds`` of the pass, sent at ``burst``: all of it less
        ``early`` bits."""
        packet_size = self.params.packet_size
        bits = (first_pass.arrivals - 1) * packet_size * 8 - early
        if bits > 0:
            overflowed = first_pass.lost > OVERFLOW * -(-size // packet_size)
            self.selector.arrived(bits, seconds, burst_rate_bps(*burst, packet_size), burst[1] / 1000,
                                  lost=overflowed)

    def offer(self, burst: tuple[int, int]) -> tuple[int, int]:
        """What to offer while the sender uses ``burst``."""
        p = self.params
        rate = self.selector.offer(burst_rate_bps(*burst, p.packet_size))
        if rate >= p.rate_bps:
            return p.burst_size, p.burst_interval
        slowest = burst_rate_bps(1, 0xFFFF, p.packet_size) * 1.01  # the 16-bit interval's longest
        return burst_for_rate(max(rate, slowest), p.packet_size, min_interval=p.burst_interval,
                              max_burst=p.burst_size)
