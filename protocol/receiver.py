"""The data receiver's half of an established connection (RFC 998 sections 5.2, 5.3.1).

Receive buffers move ACK-WAIT -> ACKED -> RECEIVING -> RECEIVED. Data timers are
RFC 998's loose/tight timers, estimated from the burst rate and, as RFC 1030 reports
MIT did after the Wideband tests, from the measured inter-packet arrival time.
Buffers the client already holds (a resumed transfer) get an OK instead of a GO.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Hashable
from dataclasses import dataclass

from . import events as ev
from .control_fifo import ControlFifo
from .packets import Done, Go, NullAck, Packet, Resend
from .rate import MIN_RESEND, BurstOffers
from .role import Context
from .timers import RetransmitTimer


class RxState(enum.Enum):
    ACK_WAIT = "ack-wait"
    ACKED = "acked"
    RECEIVING = "receiving"
    RECEIVED = "received"


@dataclass
class RxBuffer:
    number: int
    state: RxState
    expected: int
    """Packets still expected: the capacity, or what the last RESEND asked for."""
    asked: frozenset[int] | None = None
    """What the last RESEND asked for."""


class Receiver:
    def __init__(self, conn: Context, *, held: frozenset[int] = frozenset(), last: int | None = None) -> None:
        self.conn = conn
        self.held = held
        """Buffers the client already has: never posted, acknowledged with an OK."""
        p, t = conn.params, conn.timing
        self.fifo = ControlFifo(budget=max(576, p.packet_size + 24))
        self.rtt = RetransmitTimer(t.control_min, initial=t.control_initial, most=t.control_max)
        self.buffers: dict[int, RxBuffer] = {}
        self.next_number = 1
        """Buffers are numbered from 1, consecutively; buffer n is the (n-1)-th (reading A7)."""
        self.last_number: int | None = last
        self.burst = (p.burst_size, p.burst_interval)
        """The sender's burst size and interval in force, as its NULL-ACKs say."""
        self.burst_before: tuple[tuple[int, int], float] | None = None
        """The burst in force before this one, and when this one's first NULL-ACK came."""
        self.offers = BurstOffers(p)
        self.sent_at: dict[int, tuple[int, int]] = {}
        """Per buffer receiving, the sender's burst size and interval when its first packet came."""
        self.mean_gap = 0.0
        self.last_arrival = -1.0
        """When the newest DATA packet arrived, as the data path last reported."""
        self.newest = 0
        """The highest buffer a packet of which has arrived."""
        self.ok_at = -math.inf
        """When the latest OK was queued; -inf before the first."""
        self.unsent = False
        self.lost: set[tuple[int, int]] = set()
        """(buffer, packet) found missing at least once."""

    # -- setup ---------------------------------------------------------------------------

    def start(self, now: float) -> None:
        for _ in range(self.conn.params.max_buffers):
            self._post_next()

    def _post_next(self) -> None:
        """GO the next buffer still needed; say OK for those held before it."""
        while self.next_number in self.held:
            self.fifo.ok(self.next_number, *self.offers.offer(self.burst), round(self.rtt.timeout * 1000))
            self.next_number += 1
            self.unsent = True
        n, capacity = self.next_number, self.conn.params.packets_per_buffer
        if self.last_number is not None and n > self.last_number:
            return
        self.buffers[n] = RxBuffer(n, RxState.ACK_WAIT, capacity)
        self.next_number += 1
        self.conn.emit(ev.PostReceive(n, capacity))
        self.fifo.go(n)
        self.unsent = True

    # -- events --------------------------------------------------------------------------

    def on_packet(self, packet: Packet, now: float) -> None:
        if isinstance(packet, NullAck):
            burst = (packet.burst_size, packet.burst_interval)
            if burst != self.burst:
                self.burst_before, self.burst = (self.burst, now), burst
            self._high_ack(packet.high_ack, now)

    def on_event(self, event: ev.Event, now: float) -> None:
        match event:
            case ev.Arrivals(last_at=last_at, mean_gap=gap, high_ack=high_ack):
                self.mean_gap, self.last_arrival = gap or self.mean_gap, last_at
                self._high_ack(high_ack, now)
            case ev.FirstPacket(buffer=n, last_buffer=last):
                self._first_packet(n, last, now)
            case ev.LdataSeen(buffer=n, count=count):
                if (rb := self.buffers.get(n)) and rb.state is not RxState.RECEIVED:
                    rb.expected = min(rb.expected, count)
                    self.conn.timers.shorten(("data", n), now + self._variance())
            case ev.BufferComplete(buffer=n, size=size, first_pass=first_pass):
                self._sample(n, size, first_pass, now)
                self._complete(n, size, now)
            case ev.MissingPackets(buffer=n, packets=packets):
                self._missing(n, packets, now)
            case ev.BufferReleased(buffer=n):
                self._released(n, now)

    def _first_packet(self, n: int, last: bool, now: float) -> None:
        if last and self.last_number is None:
            self._learn_last(n)
        rb = self.buffers.get(n)
        if rb is None or rb.state is RxState.RECEIVED:
            return
        self.sent_at.setdefault(n, self.burst)
        self.newest = max(self.newest, n)
        if rb.state in (RxState.ACK_WAIT, RxState.ACKED):
            rb.state = RxState.RECEIVING
            self.conn.timers.set(("data", n), now + self._estimate(n))
        # Buffers go out in number order: lower ones should be in by now (tight timers).
        for lower in self.buffers.values():
            if lower.number < n and lower.state in (RxState.ACKED, RxState.RECEIVING):
                self.conn.timers.shorten(("data", lower.number), now + self._variance())

    def _learn_last(self, n: int) -> None:
        self.last_number = n
        for number in [m for m in self.buffers if m > n]:
            del self.buffers[number]
            self.conn.timers.cancel(("data", number))
            self.conn.emit(ev.DropReceive(number))

    def _complete(self, n: int, size: int, now: float) -> None:
        rb = self.buffers.get(n)
        if rb is None or rb.state is RxState.RECEIVED:
            return
        rb.state = RxState.RECEIVED
        self.conn.timers.cancel(("data", n))
        self.fifo.ok(n, *self.offers.offer(self.burst), round(self.rtt.timeout * 1000))
        self.unsent, self.ok_at = True, now
        # Hold the CONTROL packet until the client releases the buffer (or ok_hold passes),
        # so the OK travels with the next GO.
        self.conn.timers.set("ok-hold", now + self.conn.timing.ok_hold)
        final = self.last_number is not None and self.next_number > self.last_number and all(
            rb.state is RxState.RECEIVED for rb in self.buffers.values() if rb.number <= self.last_number)
        self.conn.emit(ev.Deliver(n, n - 1, size, final))

    def _sample(self, n: int, size: int, first_pass: ev.FirstPass | None, now: float) -> None:
        """Buffer ``n``'s delivery, for the rate offers: what arrived while its first pass
        did (a data path that cannot time it says nothing). A first pass the sender's rate
        changed in the middle of says what the part since the change delivered. One that
        came all at once (a read of coalesced datagrams has one arrival time) counts its
        bits at no time: buffers smaller than a burst mostly do, and counting only those
        that spanned a burst's pause made the path look a burst's worth of buffers slower
        than it was (16 KiB buffers on loopback: 938 Mb/s offered down to 10)."""
        burst = self.sent_at.pop(n, self.burst)
        if first_pass is None:
            return
        if burst == self.burst:
            self.offers.first_pass(size, burst, first_pass)
        elif self.burst_before is not None and self.burst_before[0] == burst:
            self.offers.changed_pass(size, burst, self.burst, first_pass, now - self.burst_before[1])

    def _released(self, n: int, now: float) -> None:
        if (rb := self.buffers.get(n)) is None or rb.state is not RxState.RECEIVED:
            return
        del self.buffers[n]
        self._post_next()
        self.conn.timers.cancel("ok-hold")

    def _missing(self, n: int, packets: tuple[int, ...], now: float) -> None:
        rb = self.buffers.get(n)
        if rb is None or rb.state is RxState.RECEIVED or not packets:
            return
        # Ask for no more than twice what the path delivered of this buffer last time:
        # on a path far slower than the sender's rate (before any OK has slowed it),
        # a RESEND of everything missing would only overflow its queue again.
        got = rb.expected - len(packets) if rb.asked is None else len(rb.asked.difference(packets))
        packets = packets[:max(MIN_RESEND, 2 * got)]
        rb.state, rb.expected, rb.asked = RxState.ACK_WAIT, len(packets), frozenset(packets)
        stats = self.conn.stats
        stats.data_timeouts += 1
        stats.packets_resent += len(packets)
        self.lost.update((n, p) for p in packets)
        stats.packets_lost = len(self.lost)
        self.fifo.resend(n, packets)
        self.unsent = True

    def _high_ack(self, wire: int, now: float) -> None:
        retired, rtt = self.fifo.acknowledge(wire, now)
        if rtt is not None:
            self.rtt.sample(rtt)
        for message in retired:
            rb = self.buffers.get(message.buffer)
            if isinstance(message, (Go, Resend)) and rb and rb.state is RxState.ACK_WAIT:
                rb.state = RxState.ACKED
                self.conn.timers.set(("data", rb.number), now + self._estimate(rb.number))
        if retired and not len(self.fifo):
            self.conn.timers.cancel("control")

    # -- timers --------------------------------------------------------------------------

    def on_timer(self, key: Hashable, now: float) -> None:
        if key == "control":
            self.rtt.back_off()
            self._send(now)
        elif isinstance(key, tuple) and key[0] == "data":
            n = key[1]
            if (later := self._not_due(n, now)) is not None:
                self.conn.timers.set(("data", n), later)
            else:
                self.conn.emit(ev.QueryMissing(n))

    def _per_packet(self) -> float:
        burst_size, burst_interval = self.burst
        return max(self.mean_gap, burst_interval / 1000 / burst_size)

    def _variance(self) -> float:
        return max(self.conn.timing.data_variance, 4 * self.burst[1] / 1000, 16 * self.mean_gap)

    def _not_due(self, n: int, now: float) -> float | None:
        """A later deadline for buffer ``n``'s data timer if its packets may still come.

        Buffers go in number order, so nothing is due while no later buffer has begun
        and DATA of the first buffers still arrives: until a buffer is complete (and
        OK'd) the timers assumed the sender's pace, its cap if it chooses its rate,
        which a slow path delivers far slower. A buffer none of whose packets came may
        not have been started: a sender choosing its rate holds all but its first
        buffers until an OK reaches it, so it is not due until a round trip after the
        latest OK.
        """
        if n < self.newest:
            return None
        if self.ok_at < 0 and (paused_at := self.last_arrival + self._quiet()) > now:
            return paused_at  # asked again once DATA pauses
        rb = self.buffers.get(n)
        if rb and rb.state is RxState.ACKED and (start := self.ok_at + self.rtt.timeout) > now:
            return start + self._estimate(n)
        return None

    def _quiet(self) -> float:
        """How long no DATA may come before the path counts as paused: the variance once
        arrivals are timed, a control round trip before (the first packets' spacing is
        the path's, not the sender's, and jitter may part them further)."""
        return self._variance() if self.mean_gap else max(self._variance(), self.rtt.timeout)

    def _estimate(self, n: int) -> float:
        """Twice the time for every packet still expected at or below buffer ``n``, plus
        the variance: a timer that fires early costs a needless RESEND of the whole
        buffer (RFC 998 section 5.2.2), one that fires late only delays a repair that
        the tight timers usually start first."""
        pending = sum(rb.expected for rb in self.buffers.values()
                      if rb.number <= n and rb.state is not RxState.RECEIVED)
        return 2 * pending * self._per_packet() + self._variance()

    # -- output --------------------------------------------------------------------------

    def after(self, now: float) -> None:
        """Called after every input: send the control packet if it changed, or finish."""
        if self.unsent and "ok-hold" not in self.conn.timers:
            self._send(now)
        if self._complete_transfer():
            self.conn.transmit(Done(), now)
            self.conn.finish(True, "transfer complete")

    def _send(self, now: float) -> None:
        self.unsent = False
        if not len(self.fifo):
            return
        self.conn.transmit(self.fifo.packet(now), now)
        self.conn.timers.set("control", now + self.rtt.timeout)

    def complete(self) -> bool:
        """Every buffer up to the last is delivered (or was held)."""
        return self.last_number is not None and self.next_number > self.last_number and \
            not any(n <= self.last_number for n in self.buffers)

    def sending_data(self) -> bool:
        return False

    def answer_time(self) -> float:
        return self.rtt.timeout

    def _complete_transfer(self) -> bool:
        return self.complete() and not len(self.fifo)
