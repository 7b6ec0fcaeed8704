"""The data receiver's long-lived control packet and its smoothed control timer.

RFC 998 section 5.2.1: one CONTROL packet used as a FIFO; new messages go at the tail,
acknowledged ones leave the head, and the whole packet is sent each time. Sequence
numbers are kept unbounded here and put on the wire modulo 2**16 (reading A9).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..formats.rfc998 import HEADER
from .codec import encode_message
from .packets import Control, Go, Message, Ok, Resend

SEQ_MODULUS = 1 << 16


def unwrap_seq(wire: int, reference: int) -> int:
    """The unbounded sequence number nearest ``reference`` whose low 16 bits are ``wire``."""
    delta = (wire - reference) % SEQ_MODULUS
    if delta >= SEQ_MODULUS // 2:
        delta -= SEQ_MODULUS
    return reference + delta


@dataclass
class _Entry:
    message: Message
    """With its unbounded sequence number."""
    wire: Message
    """As it goes on the wire, its sequence number modulo 2**16, and its encoded size: made
    once, for every packet resends it (40 messages a packet cost 220 us made each time)."""
    size: int
    first_sent: float | None = None
    resent: bool = False


class ControlFifo:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        """Largest CONTROL packet to send, in bytes (reading A30)."""
        self._entries: list[_Entry] = []
        self.next_seq = 1
        self.acked = 0
        """Every sequence number up to this one has been acknowledged."""

    def __len__(self) -> int:
        return len(self._entries)

    def go(self, buffer: int) -> None:
        self._append(Go(0, buffer))

    def ok(self, buffer: int, burst_size: int, burst_interval: int, control_timer_ms: int) -> None:
        self._append(Ok(0, buffer, burst_size, burst_interval, min(0xFFFF, control_timer_ms)))

    def resend(self, buffer: int, packets: tuple[int, ...]) -> None:
        """Queue RESENDs for ``packets``, split so that each fits in one control packet (A36)."""
        per_message = max(1, (self.budget - HEADER.end - 12) // 2)
        for at in range(0, len(packets), per_message):
            self._append(Resend(0, buffer, packets[at:at + per_message]))

    def _append(self, message: Message) -> None:
        wire = replace(message, seq=self.next_seq % SEQ_MODULUS)
        self._entries.append(_Entry(replace(message, seq=self.next_seq), wire, len(encode_message(wire))))
        self.next_seq += 1

    def packet(self, now: float) -> Control:
        """The lowest unacknowledged messages that fit the budget, marked as sent now."""
        messages: list[Message] = []
        size = HEADER.end
        for entry in self._entries:
            if messages and size + entry.size > self.budget:
                break
            size += entry.size
            if entry.first_sent is None:
                entry.first_sent = now
            else:
                entry.resent = True
            messages.append(entry.wire)
        return Control(tuple(messages))

    def acknowledge(self, wire_high_ack: int, now: float) -> tuple[list[Message], float | None]:
        """Retire messages up to the high-ack; returns them and an RTT sample, if clean.

        The sample comes from the newest retired message that was sent only once (Karn).
        """
        high = unwrap_seq(wire_high_ack, self.acked)
        if high <= self.acked or high >= self.next_seq:
            return [], None
        self.acked = high
        retired = [e for e in self._entries if e.message.seq <= high]
        self._entries = [e for e in self._entries if e.message.seq > high]
        clean = [now - e.first_sent for e in retired if e.first_sent is not None and not e.resent]
        return [e.message for e in retired], (clean[-1] if clean else None)
