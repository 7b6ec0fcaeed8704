"""Drops reported as they happen.

A simulated board's bridge counts what it cannot carry (a port it does not bridge, a
destination off loopback, a datagram over the MTU): a user watching ``netblt sim-board``
sees those as they happen, a line at most every few seconds, and not only when it exits.
"""

from __future__ import annotations

from collections import Counter

EVERY = 5.0
"""Seconds between two lines at least: a steady stream of drops is one line each time."""


class DropReport:
    """New drops among ``counts`` (the entries whose name ends "(dropped)")."""

    def __init__(self, counts: Counter[str], every: float = EVERY) -> None:
        self.counts, self.every = counts, every
        self.shown: dict[str, int] = {}
        self.at: float | None = None

    def line(self, now: float) -> str | None:
        """What was dropped since the last line, if anything was and it is time to say so."""
        if self.at is not None and now - self.at < self.every:
            return None
        new = {what: count - self.shown.get(what, 0) for what, count in self.counts.items()
               if what.endswith("(dropped)") and count > self.shown.get(what, 0)}
        if not new:
            return None
        self.shown.update({what: self.counts[what] for what in new})
        self.at = now
        return "dropped: " + "; ".join(f"{what.removesuffix(' (dropped)')}: {count}" for what, count in sorted(new.items()))
