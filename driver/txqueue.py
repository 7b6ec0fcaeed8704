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


class TxPacket(NamedTuple):
    buffer: int
    packet: int
    payload: memoryview
    ldata: bool
    last_buffer: bool


@dataclass
class _TxBuffer:
    data: memoryview
    count: int
    last: bool
    pending: list[int] = field(default_factory=list)
    """A heap of packet numbers to send."""
    queued: set[int] = field(default_factory=set)


class TransmitQueue:
    def __init__(self, packet_size: int) -> None:
        self.packet_size = packet_size
        self._buffers: dict[int, _TxBuffer] = {}
        self._ready: list[int] = []
        """A heap of buffer numbers that may have pending packets."""
        self.sent = 0
        self.resent = 0

    def __bool__(self) -> bool:
        return any(b.pending for b in self._buffers.values())

    def load(self, number: int, data: bytes | bytearray | memoryview, last: bool) -> None:
        """Queue every packet of a new buffer; an empty buffer is one empty LDATA (A28)."""
        count = max(1, math.ceil(len(data) / self.packet_size))
        self._buffers[number] = _TxBuffer(memoryview(data), count, last)
        self._queue(number, range(count))

    def resend(self, number: int, packets: tuple[int, ...] | list[int]) -> int:
        """Queue packets again; numbers past the LDATA ask for the LDATA (A12).

        Returns how many were queued; unknown buffers and duplicates queue nothing.
        """
        buf = self._buffers.get(number)
        if buf is None:
            return 0
        wanted = {min(p, buf.count - 1) for p in packets}
        return self._queue(number, wanted, resend=True)

    def release(self, number: int) -> None:
        self._buffers.pop(number, None)

    def _queue(self, number: int, packets, resend: bool = False) -> int:
        buf = self._buffers[number]
        added = [p for p in packets if p not in buf.queued]
        for p in added:
            heapq.heappush(buf.pending, p)
            buf.queued.add(p)
        if added:
            heapq.heappush(self._ready, number)
            if resend:
                self.resent += len(added)
        return len(added)

    def pop(self) -> TxPacket | None:
        """The next packet to send, or None when nothing is waiting."""
        while self._ready:
            number = self._ready[0]
            buf = self._buffers.get(number)
            if buf is None or not buf.pending:
                heapq.heappop(self._ready)
                continue
            p = heapq.heappop(buf.pending)
            buf.queued.discard(p)
            self.sent += 1
            start = p * self.packet_size
            return TxPacket(number, p, buf.data[start:start + self.packet_size],
                            p == buf.count - 1, buf.last)
        return None
