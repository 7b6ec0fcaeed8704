"""The data sender's half of an established connection (RFC 998 sections 4, 5.2, 5.3.1).

It acts on GO/OK/RESEND by sequence number, keeps the high-acknowledged sequence
number, settles rate offers, and dallies after the last OK. All pacing and packet work
is the data path's. An OK for a buffer never sent means the receiver already holds it
(a resumed transfer): it counts as acknowledged.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from . import events as ev
from .control_fifo import SEQ_MODULUS, unwrap_seq
from .packets import Control, Done, Go, Message, NullAck, Ok, Packet, Resend
from .params import burst_for_rate
from .rate import SMALL_START, START_BUFFER_TIME, START_DIVISOR, START_WINDOW
from .role import Context


class Sender:
    def __init__(self, conn: Context) -> None:
        self.conn = conn
        p = conn.params
        # Every buffer but the last is full; an empty transfer still sends one (A28).
        self.total_buffers: int | None = (None if conn.transfer_size is None else
                                          max(1, math.ceil(conn.transfer_size / p.buffer_size)))
        """None while the client's stream has not ended."""
        self.high_ack = 0
        self.seen_ahead: set[int] = set()
        """Messages processed above the high-ack, out of order."""
        self.sending: set[int] = set()
        """GO'd buffers not yet OK'd."""
        self.held: list[int] = []
        """GO'd buffers not yet started: a sender choosing its rate starts START_WINDOW of
        them before its first OK, so its first round trip risks little on an unknown path."""
        self.acked: set[int] = set()
        self.limits = (p.burst_size, p.burst_interval)
        self.burst = self.limits
        self.tx_busy = False
        self.dallying = False
        self.receiver_control_timer = 0.0

    def start(self, now: float) -> None:
        p = self.conn.params
        start = max(p.rate_bps / START_DIVISOR, p.buffer_size * 8 / START_BUFFER_TIME)
        if p.auto_rate and START_WINDOW * p.buffer_size > SMALL_START and start < p.rate_bps:
            # A fraction of the cap, until the receiver's offers say what the path carries
            # (buffers so small that a queue holds the first of them go at the cap); the
            # NULL-ACK tells the receiver the rate its first buffers come at.
            self.burst = burst_for_rate(start, p.packet_size, min_interval=p.burst_interval, max_burst=p.burst_size)
            self.conn.transmit(NullAck(0, *self.burst), now)
        self.conn.emit(ev.SetRate(*self.burst))
        self.conn.emit(ev.StampHighAck(0))

    def on_packet(self, packet: Packet, now: float) -> None:
        if isinstance(packet, Control):
            self._control(packet, now)
        elif isinstance(packet, Done) and self.dallying:
            self.conn.finish(True, "transfer complete")

    def on_event(self, event: ev.Event, now: float) -> None:
        if isinstance(event, ev.TransmitIdle):
            self.tx_busy = False
        elif isinstance(event, ev.LastBuffer) and self.total_buffers is None:
            # Buffers GO'd past the end were never loaded: forget them (A26).
            self.total_buffers = event.buffer
            self.sending = {n for n in self.sending if n <= event.buffer}
            self.held = [n for n in self.held if n <= event.buffer]
            self._dally_when_done(now)

    def on_timer(self, key: Hashable, now: float) -> None:
        if key == "dally":
            self.conn.finish(True, "transfer complete")

    def after(self, now: float) -> None:
        pass

    def sending_data(self) -> bool:
        return self.tx_busy

    def complete(self) -> bool:
        """The receiver said OK to every buffer: the data is safe, and only the dally remains."""
        return self.dallying

    def answer_time(self) -> float:
        return self.conn.timing.quit_timeout

    # -- control messages ------------------------------------------------------------------

    def _control(self, packet: Control, now: float) -> None:
        before, rate_changed = (self.high_ack, self.burst), False
        for message in packet.messages:
            seq = unwrap_seq(message.seq, self.high_ack)
            if seq <= self.high_ack or seq in self.seen_ahead:
                continue
            self.seen_ahead.add(seq)
            rate_changed |= self._act(message, now)
            if self.conn.finished:
                return
        while self.high_ack + 1 in self.seen_ahead:
            self.high_ack += 1
            self.seen_ahead.remove(self.high_ack)
        if self.high_ack != before[0]:
            self.conn.emit(ev.StampHighAck(self.high_ack % SEQ_MODULUS))
        if self.burst != before[1]:
            self.conn.emit(ev.SetRate(*self.burst))
        # DATA carries the high-ack while data flows; otherwise, and after every rate
        # offer (reading A25), say it in a NULL-ACK.
        if rate_changed or not self.tx_busy or not self.sending:
            self.conn.transmit(NullAck(self.high_ack % SEQ_MODULUS, *self.burst), now)
        self._dally_when_done(now)

    def _dally_when_done(self, now: float) -> None:
        if len(self.acked) == self.total_buffers and not self.dallying:
            self.dallying = True
            # Long enough for the receiver's control timer to fire three times, backing off
            # (1 + 2 + 4), so that a lost final NULL-ACK can be answered again (A23).
            dally = 8 * self.receiver_control_timer + self.conn.timing.dally_margin
            self.conn.timers.set("dally", now + dally)

    def _act(self, message: Message, now: float) -> bool:
        """Carry out one new message; True when it was an OK offering new rates."""
        if isinstance(message, Go):
            self._go(message.buffer, now)
        elif isinstance(message, Resend):
            if message.buffer in self.sending and message.packets:
                self.conn.emit(ev.ResendPackets(message.buffer, message.packets))
                self.conn.stats.packets_lost += len(message.packets)
                self.tx_busy = True
        elif isinstance(message, Ok):
            n = message.buffer
            if n in self.sending:
                self.sending.remove(n)
                self.acked.add(n)
                self.conn.emit(ev.ReleaseSendBuffer(n, n - 1))
            elif n not in self.acked and self.total_buffers is not None and 1 <= n <= self.total_buffers:
                self.acked.add(n)
                self.conn.emit(ev.ReleaseSendBuffer(n, n - 1, sent=False))
            while self.held:
                self._start(self.held.pop(0))
            self.receiver_control_timer = message.control_timer / 1000
            offer = (min(message.burst_size, self.limits[0]) or 1,
                     max(message.burst_interval, self.limits[1]))
            if offer != self.burst:
                self.burst = offer
                return True
        return False

    def _go(self, n: int, now: float) -> None:
        # Buffer n holds the client's (n-1)-th buffer (reading A7), so GOs may be acted on
        # in any order. A GO past the last buffer (the receiver cannot know where the data
        # ends) or for a buffer already sent is acknowledged and otherwise ignored (A26).
        if n in self.sending or n in self.held or n in self.acked or n < 1 or \
                self.total_buffers is not None and n > self.total_buffers:
            return
        if len(self.sending) + len(self.held) >= self.conn.params.max_buffers:
            self.conn.fail(f"protocol error: GO for buffer {n} exceeds "
                           f"{self.conn.params.max_buffers} outstanding buffers", now)
            return
        if self.conn.params.auto_rate and not self.acked and len(self.sending) >= START_WINDOW:
            self.held.append(n)
            return
        self._start(n)

    def _start(self, n: int) -> None:
        self.sending.add(n)
        self.conn.emit(ev.SendBuffer(n, n - 1, n == self.total_buffers))
        self.tx_busy = True
