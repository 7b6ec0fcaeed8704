"""A board's transmit side: its slots, the uploads into them, the SENDs and RESENDs, the
pacer's registers, and how long the host may leave the board alone while it sends."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..formats.born import BornBuffer, PatternBuffer, TakenBuffer
from ..formats.registers import COMMAND_WORD, Command, PacingMode
from ..protocol import events as ev
from .board_session import WIRE_BPS, BoardSession, Operations, command, read, write
from .link_client import QUIET_PATIENCE, LinkError

LEAVE_AT_MOST = 0.05
"""Seconds a sending host leaves its board alone while the board's transmitter has work
queued and the peer has lately asked for resends (interrupt moderation, as a NIC's): the
pushes, replies and peer's messages of that while are taken in one wake instead of one
each. A RESEND waits up to this long, hidden behind the buffers queued, which last at least
twice as long."""
LEAVE_CLEAN = 0.4
"""The same while the peer has asked for no resend for :data:`LOSS_MEMORY` seconds: on a
clean path only OKs come, and one wake takes several buffers' (a wake after a sleep costs
some 150-400 us of CPU on a VM, however little it does: `make bench-wake`)."""
LOSS_MEMORY = 2.0
"""Seconds without a resend asked for after which the peer's path counts as clean."""
LEAVE_AT_LEAST = 0.002
"""Shorter than this, a sleep saves no wake."""
PUSH_HOLD = QUIET_PATIENCE / 5
"""Seconds a sending host's board holds its events for a control packet to join their push
(10 ms): a buffer's SENT then comes with the peer's OK for it (or for one before), one wake
of the host for both. Short beside the wait for a quiet run's answer, which that push ends
(else the run asks for STATUS each buffer); and an event's news is of no use to a sender
sooner: the core acts on SENT only at its next control message or keepalive. Set for
buffers the host uploads, whose QUIET run waits for that push; buffers born on the board
have a reply of their own, and there it showed no saving (docs/benchmarks.md)."""
SOURCE_SILENCE = 5.0
"""Seconds a TAKE may wait on the source port with no word taken before the user hears."""

Data = bytes | memoryview


@dataclass
class SendingSlot:
    """A transmit slot and the buffer it holds."""

    buffer: int
    size: int
    sent: bool = False
    taking: bool = False
    """Filled by a TAKE: its SEND waits for the source port's words."""
    ahead: Data | None = None
    """Uploaded before the protocol core handed the buffer over (:meth:`TransmitSlots.load_ahead`):
    these bytes, and no SEND yet."""

    @property
    def waiting(self) -> bool:
        """The board is to send it and has not yet."""
        return not self.sent and self.ahead is None


@dataclass
class Upload:
    """A transmit slot waiting for its data, and the SEND that follows it (none: loaded ahead)."""

    slot: int
    data: Data
    then: Operations


class TransmitSlots:
    """The board's transmit slots as the protocol core's sending calls use them; ``events``
    hears :class:`~..protocol.events.TransmitIdle` when the board has sent everything."""

    def __init__(self, session: BoardSession, events: list[ev.Event],
                 notice: Callable[[str], None] = lambda text: None) -> None:
        self.session, self.events, self.notice = session, events, notice
        self.slots: dict[int, SendingSlot] = {}
        self.uploads: deque[Upload] = deque()
        """Slots waiting for their upload, one a turn of the run loop (:meth:`upload_next`)."""
        self.resent = 0
        """Packets the peer asked for again."""
        self.resent_at = time.monotonic()
        """When the peer last asked for a resend, or the connection began: a path counts as
        clean once :data:`LOSS_MEMORY` seconds pass without one, not before its first losses
        could be heard of."""
        self.busy = False
        """Given buffers or resends since the board last said it sent them all."""
        self.pace = 0.0
        """Bytes a host second the board sends at, at most: its burst rate or its wire."""
        self.source_seen = (time.monotonic(), 0)
        """When SOURCE_TAKEN was last read (or no TAKE waited), and what it said."""
        self.source_silent = False
        self.holding = False
        """PUSH_HOLD is set: this host uploads what it sends."""

    def reset(self) -> None:
        """The last connection is over: nothing of it is here (its board registers are
        reset by :class:`~.board.BoardDataPath`)."""
        self.slots, self.uploads = {}, deque()
        self.resent, self.resent_at, self.busy, self.holding = 0, time.monotonic(), False, False

    def configure(self) -> None:
        """A connection is set up: its path counts as lossy until it has been clean for
        :data:`LOSS_MEMORY` (its first losses could not be heard of before)."""
        self.resent_at = time.monotonic()

    # -- the protocol core's calls ----------------------------------------------------------------

    def send_buffer(self, number: int, data: Data | BornBuffer, last: bool) -> None:
        """Queue the buffer's upload, and its SEND behind it, for the next turn of the run
        loop: one buffer a turn, so a RESEND or OK that came meanwhile is acted on between
        uploads, not after all of them (the protocol core hands over every buffer a GO
        allows at once: 64 MiB on the Versa). Or have the board make it (its pattern source:
        FILL; its source port: TAKE), with the SEND in one request (the board fetches the
        slot's packets once the slot is written). That follows no upload, so it goes as
        urgent and joins the high-ack stamp that the GO's OK brought: one request a buffer."""
        ahead = self._slot_of(number)
        if ahead is not None and self._send_ahead(ahead, data, last):
            return
        index = self._free()
        self.slots[index] = SendingSlot(number, len(data), taking=isinstance(data, TakenBuffer))
        send = command(Command.SEND, index, number, len(data), flag=int(last))
        if isinstance(data, PatternBuffer):
            self.session.submit(command(Command.FILL, index, data.key, data.length, flag=1) + send, urgent=True)
        elif isinstance(data, TakenBuffer):
            self.session.submit(command(Command.TAKE, index, 0, data.length, flag=1) + send, urgent=True)
        else:
            assert not isinstance(data, BornBuffer)
            if not self.holding:
                self.session.set(PUSH_HOLD=self.session.clock.cycles(PUSH_HOLD))
                self.holding = True
            self.uploads.append(Upload(index, data, send))
        self.busy = True

    def load_ahead(self, number: int, data: Data) -> None:
        """Upload a buffer before the protocol core hands it over: the first, while the OPEN
        is out (4 MiB take 43 ms, which a long path's transfer waited before its first DATA).
        Its SEND waits for :meth:`send_buffer` with the same bytes; other bytes (the RESPONSE
        shrank the buffers) are uploaded again, and a slot the core needs is taken back."""
        index = self._free()
        self.slots[index] = SendingSlot(number, len(data), ahead=data)
        self.uploads.append(Upload(index, data, []))

    def _send_ahead(self, index: int, data: Data | BornBuffer, last: bool) -> bool:
        """Send the buffer loaded ahead into slot ``index`` if ``data`` is what it holds;
        else forget it."""
        slot = self.slots[index]
        # Compared as bytes: memoryview's == goes byte by byte (8 ms for 4 MiB, bytes' 0.9)
        if slot.ahead is None or isinstance(data, BornBuffer) or bytes(slot.ahead) != bytes(data):
            self.release(slot.buffer)
            return False
        slot.ahead = None
        send = command(Command.SEND, index, slot.buffer, len(data), flag=int(last))
        waiting = next((upload for upload in self.uploads if upload.slot == index), None)
        if waiting is not None:
            waiting.then = send
        else:
            self.session.submit(send)
        self.busy = True
        return True

    def upload_next(self) -> bool:
        """Upload the next slot waiting, then its SEND (in the upload's run); False if none
        waits."""
        if not self.uploads:
            return False
        upload = self.uploads.popleft()
        self.session.upload(upload.slot, upload.data, upload.then)
        return True

    def resend(self, number: int, packets: tuple[int, ...]) -> None:
        index = self._slot_of(number)
        if index is None or any(upload.slot == index for upload in self.uploads):
            return  # not the board's, or not sent yet: its first pass carries every packet
        self.resent += len(packets)
        self.resent_at = time.monotonic()
        self.busy = True
        # Urgent: the buffer's SEND ran, so its DATA reached the peer.
        run = write("COMMAND", COMMAND_WORD.pack(op=Command.RESEND, slot=index))
        self.session.operations([op for packet in packets for op in (write("ARG0", packet), run)], urgent=True)

    def release(self, number: int) -> None:
        index = self._slot_of(number)
        if index is not None:
            del self.slots[index]
            self.uploads = deque(upload for upload in self.uploads if upload.slot != index)

    def set_rate(self, burst_size: int, burst_interval_ms: int, packet_size: int) -> None:
        clock = self.session.clock
        bursts = burst_size * packet_size / (burst_interval_ms / 1000)
        self.pace = min(bursts, WIRE_BPS / 8 * clock.scale)
        self.session.set(PACING_MODE=PacingMode.BURSTS, BURST_SIZE=burst_size,
                         BURST_INTERVAL=clock.cycles(burst_interval_ms / 1000))

    def start_stamps(self, bits_per_second: float) -> None:
        """Restart the built-in stamp source at this rate: its words 0, 1, 2 ... one every
        so many cycles of the board's clock (as the host sees it run)."""
        every = min(0xFFFF, self.session.clock.cycles(8 * self.session.geometry.beat_bytes / bits_per_second))
        self.session.set(STAMP_EVERY=every)

    # -- the board's word ------------------------------------------------------------------------------

    def sent(self, index: int) -> None:
        """SENT: the board sent slot ``index``'s buffer; all of them, with no resend asked."""
        if index in self.slots:
            self.slots[index].sent = True
            if not self.resent and not self.waiting():
                self.busy = False
                self.events.append(ev.TransmitIdle())

    def went_idle(self, idle: bool) -> None:
        """STATE's tx_idle, read: the board has nothing more to send (resends included)."""
        if self.busy and idle and not self.waiting():
            self.busy = False
            self.events.append(ev.TransmitIdle())

    def waiting(self) -> bool:
        return any(slot.waiting for slot in self.slots.values())

    def unattended(self, now: float) -> float:
        """Seconds the host may leave the board alone now: half what the buffers queued and
        not yet sent take at the pace, less the one it may be finishing (0 with fewer than
        two, or no pace known), at most :data:`LEAVE_AT_MOST` while the peer lately asked
        for resends and :data:`LEAVE_CLEAN` once it has not for :data:`LOSS_MEMORY`."""
        queued = [slot.size for slot in self.slots.values() if slot.waiting]
        if len(queued) < 2 or not self.pace:
            return 0.0
        most = LEAVE_AT_MOST if now - self.resent_at < LOSS_MEMORY else LEAVE_CLEAN
        return min((sum(queued) - max(queued)) / self.pace / 2, most)

    def watch_source(self) -> None:
        """A TAKE waits as long as its source offers nothing (none connected, or one
        stopped): the user hears of it once the port has taken no word for
        :data:`SOURCE_SILENCE` seconds, and again after words came and stopped."""
        now = time.monotonic()
        if not any(slot.taking and not slot.sent for slot in self.slots.values()):
            self.source_seen = (now, self.source_seen[1])  # a silence counts from a take
            return
        if now < self.source_seen[0] + SOURCE_SILENCE:
            return
        (taken,) = self.session.operations([read("SOURCE_TAKEN")], wait=True, urgent=True)
        silent = taken == self.source_seen[1]
        if silent and not self.source_silent:
            self.notice(f"the board's source port has taken no word for {SOURCE_SILENCE:g} s: its TAKE "
                        "waits for a source to offer some (--source stamps runs the built-in one)")
        self.source_silent, self.source_seen = silent, (now, taken)

    # -- inside -------------------------------------------------------------------------------------

    def _slot_of(self, number: int) -> int | None:
        return next((i for i, slot in self.slots.items() if slot.buffer == number), None)

    def _free(self) -> int:
        for index in range(self.session.geometry.tx_slots):
            if index not in self.slots:
                return index
        ahead = next((i for i, slot in self.slots.items() if slot.ahead is not None), None)
        if ahead is not None:  # loaded ahead, never handed over (its buffer was held already)
            self.release(self.slots[ahead].buffer)
            return ahead
        raise LinkError(f"board {self.session.shown}: every transmit slot is in use")

