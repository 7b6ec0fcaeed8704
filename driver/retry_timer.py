"""The host link's retry timer (docs/host-link.md)."""

from __future__ import annotations

BACKOFF = 64
"""The most a retry time is doubled to while the board stays silent."""


class RetryTimer:
    """How long the host link waits for a reply before asking where the board is, from
    the round trips it measures, as TCP's retransmission timer (RFC 6298): the smoothed
    round trip plus four times its variation, never under ``least`` (a board's own few
    datagrams' time), doubled at each expiry in a row (up to :data:`BACKOFF` times) and
    back to the measure at the next round trip timed. A fixed timer retried a board
    that answered late into a storm, and a slow one made every loss cost the same wait."""

    def __init__(self, least: float) -> None:
        self.least = least
        self.smoothed: float | None = None
        self.variation = 0.0
        self.backoff = 1

    @property
    def timeout(self) -> float:
        measured = self.least if self.smoothed is None else self.smoothed + 4 * self.variation
        return max(self.least, measured) * self.backoff

    def sample(self, rtt: float) -> None:
        if self.smoothed is None:
            self.smoothed, self.variation = rtt, rtt / 2
        else:
            self.variation += (abs(self.smoothed - rtt) - self.variation) / 4
            self.smoothed += (rtt - self.smoothed) / 8
        self.backoff = 1

    def expired(self) -> None:
        self.backoff = min(BACKOFF, 2 * self.backoff)

    def answered(self) -> None:
        """The board is making progress: no backoff, though nothing was timed."""
        self.backoff = 1
