"""Named deadlines for a sans-IO state machine: time is only ever passed in."""

from __future__ import annotations

import math
from collections.abc import Hashable


class Timers:
    def __init__(self) -> None:
        self._at: dict[Hashable, float] = {}

    def set(self, key: Hashable, at: float) -> None:
        self._at[key] = at

    def shorten(self, key: Hashable, at: float) -> None:
        """Move ``key`` earlier to ``at``; a timer that is not running is left alone."""
        if key in self._at and at < self._at[key]:
            self._at[key] = at

    def cancel(self, key: Hashable) -> None:
        self._at.pop(key, None)

    def keep_only(self, *keys: Hashable) -> None:
        self._at = {k: at for k, at in self._at.items() if k in keys}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._at

    @property
    def next(self) -> float | None:
        return min(self._at.values(), default=None)

    def pop_expired(self, now: float) -> list[Hashable]:
        """Keys whose deadline is at or before ``now``, earliest first, now cancelled."""
        due = sorted((at, i, key) for i, (key, at) in enumerate(self._at.items()) if at <= now)
        for _, _, key in due:
            del self._at[key]
        return [key for _, _, key in due]


class RetransmitTimer:
    """How long to wait for an answer before sending again, from the round trips measured,
    as TCP's retransmission timer (RFC 6298): the smoothed round trip plus four times its
    variation (``initial`` until one is timed), within ``least`` and ``most``; doubled at
    each expiry in a row, up to ``backoff_most`` times, and back to the measure once an
    answer comes. The receiver's control timer (RFC 998's "plus a variance") and the host
    link's retry timer are both this one."""

    def __init__(self, least: float, *, initial: float | None = None, most: float = math.inf,
                 backoff_most: float = math.inf) -> None:
        self.least, self.initial, self.most, self.backoff_most = least, initial, most, backoff_most
        self.smoothed: float | None = None
        self.variation = 0.0
        self.backoff = 1.0

    @property
    def timeout(self) -> float:
        if self.smoothed is not None:
            measured = self.smoothed + 4 * self.variation
        else:
            measured = self.least if self.initial is None else self.initial
        return min(self.most, max(self.least, measured) * self.backoff)

    def sample(self, rtt: float) -> None:
        """A round trip timed (never one whose request went twice: Karn's rule)."""
        if self.smoothed is None:
            self.smoothed, self.variation = rtt, rtt / 2
        else:
            self.variation += (abs(self.smoothed - rtt) - self.variation) / 4
            self.smoothed += (rtt - self.smoothed) / 8
        self.backoff = 1.0

    def back_off(self) -> None:
        """It expired with no answer."""
        self.backoff = min(self.backoff_most, 2 * self.backoff)

    def answered(self) -> None:
        """An answer came, untimed: the backoff goes."""
        self.backoff = 1.0
