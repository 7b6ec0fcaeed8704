"""The data sender's half of an established connection (RFC 998 sections 4, 5.2, 5.3.1).

It acts on GO/OK/RESEND by sequence number, keeps the high-acknowledged sequence
number, settles rate offers, and dallies after the last OK. All pacing and packet work
is the data path's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from . import events as ev
from .control import SEQ_MODULUS, unwrap_seq
from .packets import Control, Done, Go, Message, NullAck, Ok, Resend

if TYPE_CHECKING:
    from .engine import Connection


class Sender:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        p = conn.params
        # Every buffer but the last is full; an empty transfer still sends one (A28).
        self.total_buffers = max(1, math.ceil(conn.transfer_size / p.buffer_size))
        self.high_ack = 0
        self.seen_ahead: set[int] = set()
        """Messages processed above the high-ack, out of order."""
        self.sending: set[int] = set()
        """GO'd buffers not yet OK'd."""
        self.acked: set[int] = set()
        self.limits = (p.burst_size, p.burst_interval)
        self.burst = self.limits
        self.tx_busy = False
        self.dallying = False
        self.receiver_control_timer = 0.0

    def start(self, now: float) -> None:
        self.conn.emit(ev.SetRate(*self.burst))
        self.conn.emit(ev.StampHighAck(0))

    def on_packet(self, packet: object, now: float) -> None:
        if isinstance(packet, Control):
            self._control(packet, now)
        elif isinstance(packet, Done) and self.dallying:
            self.conn.finish(True, "transfer complete")

    def on_event(self, event: ev.Event, now: float) -> None:
        if isinstance(event, ev.TransmitIdle):
            self.tx_busy = False

    def on_timer(self, key: object, now: float) -> None:
        if key == "dally":
            self.conn.finish(True, "transfer complete")

    def after(self, now: float) -> None:
        pass

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
                self.tx_busy = True
        elif isinstance(message, Ok):
            if message.buffer in self.sending:
                self.sending.remove(message.buffer)
                self.acked.add(message.buffer)
                self.conn.emit(ev.ReleaseSendBuffer(message.buffer, message.buffer - 1))
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
        if n in self.sending or n in self.acked or not 1 <= n <= self.total_buffers:
            return
        if len(self.sending) >= self.conn.params.max_buffers:
            self.conn.fail(f"protocol error: GO for buffer {n} exceeds "
                           f"{self.conn.params.max_buffers} outstanding buffers", now)
            return
        self.sending.add(n)
        self.conn.emit(ev.SendBuffer(n, n - 1, n == self.total_buffers))
        self.tx_busy = True
