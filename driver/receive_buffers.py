"""Receive buffers: payloads written in place, one bit (byte) per packet, completion.

Per-packet work for the software and simulated data paths. A packet can only ever
write inside its own posted buffer: its header checksum, ports, buffer number, size and
LDATA count are all checked before a byte is copied.

The work is done by the compiled ``_fastpath.Slots`` (driver/_fastpath.c) where it was
built, else by :class:`PythonSlots`, which does exactly the same, more slowly.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..protocol import events as ev
from .compiled import fastpath
from .framing import HEADER_SIZE, DataHeader, FrameError, is_data, parse_header

@dataclass
class _Slot:
    number: int
    capacity: int
    data: bytearray
    bitmap: bytearray
    received: int = 0
    count: int | None = None
    """Packets in the buffer, once its LDATA has arrived."""
    size: int = 0
    complete: bool = False
    top: int = -1
    """The highest packet number placed: a packet above it is first-pass, until the
    missing packets are asked for (the resends come next)."""
    queried: bool = False
    first_at: float = 0.0
    pass_at: float = 0.0
    """When the first packet, and the last first-pass packet, arrived."""
    first_seen: int = 0
    pass_seen: int = 0
    """DATA packets seen (of any buffer) by then."""
    first_pass: int = 0
    """Its own packets that arrived before the missing ones were asked for."""


class PythonSlots:
    """Posted buffers by number; DATA datagrams checked against the negotiated sizes and
    the connection's ports, and placed."""

    def __init__(self, packet_size: int, buffer_size: int, local_port: int, foreign_port: int,
                 data_checksum: bool) -> None:
        self.packet_size, self.buffer_size = packet_size, buffer_size
        self.local_port, self.foreign_port, self.data_checksum = local_port, foreign_port, data_checksum
        self._slots: dict[int, _Slot] = {}
        self.dropped: Counter[str] = Counter()
        self.accepted = 0
        self.duplicates = 0
        """Copies of packets already placed, or of buffers already delivered (a resend that
        crossed the buffer's completion): harmless, counted apart from drops."""
        self.highest_posted = 0
        """Buffers are posted in number order: one at or below this that is not posted now
        has been delivered."""
        self.high_ack = 0
        self.last_at = 0.0
        self.seen = 0

    def post(self, number: int, capacity: int) -> None:
        self._slots[number] = _Slot(number, capacity, bytearray(self.buffer_size), bytearray(capacity))
        self.highest_posted = max(self.highest_posted, number)

    def drop(self, number: int) -> None:
        self._slots.pop(number, None)

    def missing(self, number: int) -> tuple[int, ...]:
        slot = self._slots.get(number)
        if slot is None or slot.complete:
            return ()
        slot.queried = True
        limit = slot.count if slot.count is not None else slot.capacity
        bitmap = slot.bitmap
        return tuple(p for p in range(limit) if not bitmap[p])

    def take(self, number: int) -> memoryview:
        """The data of a complete buffer; valid until :meth:`drop`."""
        slot = self._slots[number]
        return memoryview(slot.data)[:slot.size]

    def accept(self, view: memoryview, segment: int, now: float) -> tuple[list[ev.Event], list[tuple[int, int]]]:
        """Datagrams of ``segment`` bytes back to back (the last may be shorter): each DATA
        is checked and placed; returns the events they cause, and where the others are."""
        events: list[ev.Event] = []
        others = []
        for at in range(0, len(view), segment):
            datagram = view[at:at + segment]
            if not is_data(datagram):
                others.append((at, at + len(datagram)))
                continue
            try:
                header = parse_header(datagram, self.data_checksum)
            except FrameError as exc:
                self.dropped[str(exc)] += 1
                continue
            if header.foreign_port != self.local_port or header.local_port != self.foreign_port:
                self.dropped["ports"] += 1
                continue
            events += self._place(header, datagram, now)
        return events, others

    def _place(self, header: DataHeader, datagram: memoryview, at: float) -> list[ev.Event]:
        self.last_at = at
        self.seen += 1
        if (header.high_ack - self.high_ack) % 0x10000 < 0x8000:
            self.high_ack = header.high_ack
        slot = self._slots.get(header.buffer)
        if slot is None:
            if header.buffer <= self.highest_posted:
                self.duplicates += 1
            else:
                self.dropped["unknown buffer"] += 1
            return []
        p, length = header.packet, header.length - HEADER_SIZE
        start = p * self.packet_size
        if p >= slot.capacity or start + length > self.buffer_size:
            self.dropped["outside buffer"] += 1
            return []
        if length != self.packet_size and not header.ldata:
            self.dropped["data length"] += 1
            return []
        if slot.count is not None and (p >= slot.count or (header.ldata and p != slot.count - 1)):
            self.dropped["past ldata"] += 1
            return []
        if slot.bitmap[p]:
            self.duplicates += 1
            return []
        if header.ldata and any(slot.bitmap[p + 1:]):
            self.dropped["past ldata"] += 1
            return []
        slot.data[start:start + length] = datagram[HEADER_SIZE:header.length]
        slot.bitmap[p] = 1
        slot.received += 1
        self.accepted += 1
        if not slot.queried:
            slot.first_pass += 1  # reordered or not: the path brought it before anything was asked for
            if p > slot.top:
                if slot.top < 0:
                    slot.first_at, slot.first_seen = at, self.seen
                slot.top, slot.pass_at, slot.pass_seen = p, at, self.seen
        out: list[ev.Event] = []
        if slot.received == 1:
            out.append(ev.FirstPacket(slot.number, header.last_buffer))
        if header.ldata:
            slot.count, slot.size = p + 1, start + length
            out.append(ev.LdataSeen(slot.number, slot.count))
        if slot.count is not None and slot.received == slot.count:
            slot.complete = True
            first_pass = ev.FirstPass(slot.pass_at - slot.first_at, slot.pass_seen - slot.first_seen + 1,
                                      slot.count - slot.first_pass)
            out.append(ev.BufferComplete(slot.number, slot.size, first_pass))
        return out


if TYPE_CHECKING:
    Slots = PythonSlots  # the compiled one has the same calls (driver/_fastpath.pyi)
else:
    Slots = fastpath.Slots if fastpath else PythonSlots

GAP_SPAN = 2
"""Packets over which one inter-arrival sample is timed."""


class ReceiveBuffers(Slots):
    """The posted buffers, and the arrival reports that tell the protocol core how fast DATA comes."""

    def __init__(self, packet_size: int, buffer_size: int, local_port: int, foreign_port: int,
                 data_checksum: bool) -> None:
        super().__init__(packet_size, buffer_size, local_port, foreign_port, data_checksum)
        self.mean_gap = 0.0
        self._reported = (0, 0.0, 0)
        """(packets seen, arrival time, high-ack) at the last report."""
        self._gap_from = (0, 0.0)
        """(packets seen, arrival time) where the next inter-arrival sample starts."""

    def restart_gap(self) -> None:
        """A data timer ran out: DATA paused, and the gap up to the next packet (a resend,
        after a timer and a round trip) is the receiver's wait, not the path's pace. Timed
        in, it swelled the mean gap, and the data timers with it (16 x the gap), so that
        on a lossy path every repair waited longer than the last."""
        self._gap_from = (0, 0.0)

    def report(self, interval: float) -> ev.Arrivals | None:
        """Activity since the last report, once the high-ack moves or ``interval`` passes."""
        seen, at, high_ack = self._reported
        now_seen, last_at, now_high_ack = self.seen, self.last_at, self.high_ack
        if now_seen == seen or (now_high_ack == high_ack and last_at - at < interval):
            return None
        # A gap sample spans GAP_SPAN packets however often reports are flushed (before
        # every timer): one packet's report alone would time nothing.
        gap_seen, gap_at = self._gap_from
        if now_seen - gap_seen >= GAP_SPAN:
            if gap_at:
                gap = (last_at - gap_at) / (now_seen - gap_seen)
                self.mean_gap = gap if not self.mean_gap else 0.75 * self.mean_gap + 0.25 * gap
            self._gap_from = (now_seen, last_at)
        self._reported = (now_seen, last_at, now_high_ack)
        return ev.Arrivals(last_at, self.mean_gap, now_high_ack)
