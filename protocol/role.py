"""What a role (data sender or data receiver) gets from its connection, and what it offers.

The connection runs set-up, liveness and closing and knows nothing of a role's
internals; a role sees only this small context, never the connection itself.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Protocol

from . import events as ev
from .packets import Packet
from .params import Params, Timing
from .timers import Timers


@dataclass
class TransferStats:
    """RFC 1030's per-transfer counts, kept by whichever role this end plays."""

    packets_lost: int = 0
    """Receiver: packets it found missing; sender: packets the receiver asked for again."""
    packets_resent: int = 0
    """Packets asked for in RESEND messages (receiver only; a sender's data path counts
    what it actually sent again)."""
    data_timeouts: int = 0
    """Data timers that found packets missing (receiver only)."""


class Context(Protocol):
    params: Params
    timing: Timing
    timers: Timers
    transfer_size: int | None
    """Bytes the data sender's client supplies; None while a stream's end is not known."""
    stats: TransferStats

    @property
    def finished(self) -> bool: ...
    def emit(self, action: ev.Action) -> None: ...
    def transmit(self, packet: Packet, now: float) -> None: ...
    def fail(self, reason: str, now: float) -> None: ...
    def finish(self, ok: bool, reason: str) -> None: ...


class Role(Protocol):
    burst: tuple[int, int]
    """The sender's burst size and interval now (a receiver learns them from its NULL-ACKs)."""

    def start(self, now: float) -> None: ...
    def on_packet(self, packet: Packet, now: float) -> None: ...
    def on_event(self, event: ev.Event, now: float) -> None: ...
    def on_timer(self, key: Hashable, now: float) -> None: ...
    def after(self, now: float) -> None:
        """Called after every input the connection handled."""
    def sending_data(self) -> bool:
        """DATA is flowing, so it carries liveness and no KEEPALIVE is needed."""
    def complete(self) -> bool:
        """Everything this end needed has arrived: a silent peer no longer matters."""
    def answer_time(self) -> float:
        """Seconds to keep answering a retransmitted QUIT after acknowledging one."""
