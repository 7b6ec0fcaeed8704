"""Burst pacing: ``burst_size`` packets per ``interval`` seconds, start to start."""

from __future__ import annotations

CATCH_UP = 4
"""Intervals of lateness a sender makes up with bursts back to back: a thread the OS
held up for a few milliseconds (two busy processes on two cores stall each other that
long) keeps its average rate; after a longer idle spell the schedule restarts."""


class BurstPacer:
    def __init__(self, burst_size: int, interval: float) -> None:
        self.burst_size, self.interval = burst_size, interval
        self.next_burst = 0.0
        self.remaining = 0

    def set_rate(self, burst_size: int, interval: float) -> None:
        """New values apply from the next burst (reading A25)."""
        self.burst_size, self.interval = burst_size, interval

    def allowance(self, now: float) -> int:
        """How many packets may go at ``now``; starts a new burst when one is due.

        A burst that is late by less than :data:`CATCH_UP` intervals keeps the schedule;
        after a longer idle spell the schedule restarts at ``now``, and what the last
        burst left unsent lapses (else a sender that ran out of data mid-burst would
        send that rest at once whenever data came again, at any rate set since).
        """
        idle = now - self.next_burst >= CATCH_UP * self.interval
        if idle or (self.remaining == 0 and now >= self.next_burst):
            start = now if idle else self.next_burst
            self.next_burst = start + self.interval
            self.remaining = self.burst_size
        return self.remaining

    def sent(self, packets: int = 1) -> None:
        self.remaining -= packets
