"""Buffers the data path makes where the packets leave: data born on the board.

A transfer's source hands the endpoint one of these instead of bytes, and no byte of it
crosses the host: a board's pattern source makes a :class:`PatternBuffer` (FILL), its
source port takes a :class:`TakenBuffer` from whatever feeds it (TAKE); the software
data path makes the pattern in C and has no source port. At the far end a receiving
board may drain each buffer to its sink port (DRAIN; its pattern checker watching, where
built) and hand on a :class:`DrainedBuffer`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PatternBuffer:
    """The test pattern (formats/pattern.py) of buffer ``key``, the buffer's index in the
    transfer: ``length`` bytes of it."""

    key: int
    length: int

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True, slots=True)
class TakenBuffer:
    """The next ``length`` bytes the board's source port takes from its source."""

    length: int

    def __len__(self) -> int:
        return self.length


BornBuffer = PatternBuffer | TakenBuffer


@dataclass(frozen=True, slots=True)
class DrainedBuffer:
    """What a receiving board hands on in place of a buffer's bytes once its sink port took
    them (DRAIN): their length, and how many of their beats the pattern checker found not
    to be the test pattern (saturated at 65,535; 0 without a checker). The bytes never
    cross the host."""

    length: int
    mismatched_beats: int

    def __len__(self) -> int:
        return self.length
