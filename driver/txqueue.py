"""The sender's priority pipe (RFC 969 section 6, RFC 998 section 5.2).

Every packet waiting to go, new or resent, is ordered by buffer number, lowest first,
and within a buffer by packet number; so resends for buffer A go out ahead of new data
for a later buffer B. NETBLT keeps no copies: resends are read from the buffer again.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import NamedTuple


class TxRun(NamedTuple):
    """Packets ``first`` .. ``first + n - 1`` of one buffer, to go in that order."""

    buffer: int
    first: int
    n: int
    data: memoryview
    """The whole buffer's data."""
    last_buffer: bool


@dataclass
class _TxBuffer:
    data: memoryview
    count: int
    last: bool
    fresh: int = 0
    """Packets below this have gone at least once; the rest wait for their first time."""
    pending: list[int] = field(default_factory=list)
    """A heap of packet numbers below ``fresh`` to send again."""
    queued: set[int] = field(default_factory=set)

    def waiting(self) -> bool:
        return bool(self.pending) or self.fresh < self.count


class TransmitQueue:
    def __init__(self, packet_size: int) -> None:
        self.packet_size = packet_size
        self._buffers: dict[int, _TxBuffer] = {}
        self._ready: list[int] = []
        """A heap of buffer numbers that may have packets waiting."""
        self.sent = 0
        self.resent = 0

    def __bool__(self) -> bool:
        return any(b.waiting() for b in self._buffers.values())

    def load(self, number: int, data: bytes | bytearray | memoryview, last: bool) -> None:
        """Queue every packet of a new buffer; an empty buffer is one empty LDATA (A28)."""
        count = max(1, math.ceil(len(data) / self.packet_size))
        self._buffers[number] = _TxBuffer(memoryview(data), count, last)
        heapq.heappush(self._ready, number)

    def resend(self, number: int, packets: tuple[int, ...] | list[int]) -> int:
        """Queue packets again; numbers past the LDATA ask for the LDATA (A12).

        Returns how many were queued; unknown buffers and packets already waiting queue nothing.
        """
        buf = self._buffers.get(number)
        if buf is None:
            return 0
        added = [p for p in {min(p, buf.count - 1) for p in packets} if p < buf.fresh and p not in buf.queued]
        for p in added:
            heapq.heappush(buf.pending, p)
            buf.queued.add(p)
        if added:
            heapq.heappush(self._ready, number)
            self.resent += len(added)
        return len(added)

    def release(self, number: int) -> None:
        self._buffers.pop(number, None)

    def pop_run(self, limit: int) -> TxRun | None:
        """Up to ``limit`` packets that go next, consecutive in one buffer; None when
        nothing is waiting."""
        while self._ready:
            number = self._ready[0]
            buf = self._buffers.get(number)
            if buf is None or not buf.waiting():
                heapq.heappop(self._ready)
                continue
            if buf.pending:  # resends first: they are all below ``fresh``
                first, n = heapq.heappop(buf.pending), 1
                while n < limit and buf.pending and buf.pending[0] == first + n:
                    heapq.heappop(buf.pending)
                    n += 1
                buf.queued.difference_update(range(first, first + n))
            else:
                first, n = buf.fresh, min(limit, buf.count - buf.fresh)
                buf.fresh += n
            self.sent += n
            return TxRun(number, first, n, buf.data, buf.last)
        return None
