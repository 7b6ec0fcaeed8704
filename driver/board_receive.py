"""A board's receive side: its slots, posted for buffers and released, their completions
downloaded or drained on the board, the missing-packet queries and their answers, and
what the slots say of the arrivals."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..formats.born import DrainedBuffer
from ..formats.registers import RECEIVED_FLAGS, Command, Event
from ..protocol import events as ev
from .board_session import BoardSession, Operations, command, read, write
from .link_client import LinkError
from .link_requests import Part, Request


ALIVE_EVERY = 0.005
"""Seconds between the Arrivals that say no more than that DATA still comes (the peer is
alive): a small buffer's first packet and its completion come in pushes of their own, and
an Arrivals for each was a turn of the protocol core that told it nothing new. Short
beside the core's data variance (20 ms at least); before any of its timers fires, the
board data path's ``flush`` reads the slots' own arrival times (:meth:`ReceiveSlots.arrivals`)."""


@dataclass
class ReceivingSlot:
    """A receive slot and the buffer it is posted for."""

    buffer: int
    capacity: int
    posted: list[Request | Part] = field(default_factory=list)
    """Its POST: until the board has run it, the slot's status registers are a previous buffer's."""
    size: int = 0
    data: bytearray | DrainedBuffer | None = None
    """Once whole: its bytes on this host, or what the board's sink port made of them."""
    whole: bool = False
    """Received whole, and to be drained on the board in its turn; ``first_pass`` is
    reported once it is."""
    draining: bool = False
    """Its DRAIN is queued."""
    first_pass: ev.FirstPass | None = None
    queried: bool = False
    """Its missing packets were asked for: resends came, so its arrivals are no first pass."""

    @property
    def ready(self) -> bool:
        return all(request.reply is not None for request in self.posted)


@dataclass
class Query:
    """A missing-packet query not yet answered: the buffer asked about, its packets so far."""

    buffer: int
    packets: list[int] = field(default_factory=list)


class ReceiveSlots:
    """The board's receive slots as the protocol core's receiving calls use them; what the
    board says of them becomes the core's events in ``events``, and what cannot be used is
    counted in ``dropped``. With ``drain_on_board`` each whole buffer is drained, in the
    transfer's order, to the board's sink port (DRAIN; the pattern checker watching, where
    built) and handed on as a :class:`DrainedBuffer`: the bytes never cross the host link."""

    def __init__(self, session: BoardSession, events: list[ev.Event], dropped: Counter[str],
                 drain_on_board: bool = False) -> None:
        self.session, self.events, self.dropped = session, events, dropped
        self.drain_on_board = drain_on_board
        self.slots: dict[int, ReceivingSlot] = {}
        self.queries: dict[int, list[Query]] = {}
        """Per slot, the missing-packet queries not yet answered, oldest first."""
        self.next_drain = 1
        """The buffer the board drains next (``drain_on_board``)."""
        self.buffer_size = self.packet_size = 0
        self.transfer_size: int | None = None
        self.high_ack = 0
        """The high-ack last reported to the protocol core."""
        self.stale_high_ack: int | None = None
        """RX_HIGH_ACK as the last connection left it, until this one's DATA moves it: the
        board keeps the register across connections."""
        self.arriving_said = (-ALIVE_EVERY, -1)
        """When the core last heard DATA was arriving (:meth:`arriving`), and the high-ack then."""

    def reset(self, stale_high_ack: int) -> None:
        """A connection begins; RX_HIGH_ACK reads ``stale_high_ack`` (the last one's)."""
        self.slots, self.queries, self.next_drain = {}, {}, 1
        self.high_ack, self.stale_high_ack = 0, stale_high_ack
        self.arriving_said = (-ALIVE_EVERY, -1)

    def configure(self, buffer_size: int, packet_size: int, transfer_size: int | None) -> None:
        self.buffer_size, self.packet_size, self.transfer_size = buffer_size, packet_size, transfer_size

    # -- the protocol core's calls -----------------------------------------------------------------

    def post(self, number: int, capacity: int) -> None:
        index = self._free()
        self.slots[index] = ReceivingSlot(number, capacity, posted=self._command(Command.POST, index, number))

    def drop(self, number: int) -> None:
        index = self._slot_of(number)
        if index is not None:
            del self.slots[index]
            self._command(Command.RELEASE, index)

    def query_missing(self, number: int) -> None:
        index = self._slot_of(number)
        if index is not None:
            self.slots[index].queried = True
            self.queries.setdefault(index, []).append(Query(number))
            self._command(Command.QUERY_MISSING, index, self.slots[index].capacity)

    def take(self, number: int) -> memoryview | DrainedBuffer:
        index = self._slot_of(number)
        if index is None or self.slots[index].data is None:
            raise LinkError(f"board {self.session.shown}: buffer {number} is not whole on this host")
        slot = self.slots[index]
        assert slot.data is not None
        return slot.data if isinstance(slot.data, DrainedBuffer) else memoryview(slot.data)[:slot.size]

    # -- the board's word ---------------------------------------------------------------------------

    def event(self, kind: int, index: int, flags: int, value: int) -> bool:
        """An EVENT word about slot ``index``; True for DATA arriving in a slot posted now."""
        if kind in (Event.MISSING, Event.MISSING_END):
            self._missing(kind, index, value)
            return False
        slot = self.slots.get(index)
        if slot is None:
            self.dropped["board events for a released slot"] += 1
            return False
        if kind == Event.DRAINED:
            self._drained(slot, value)
            return False
        if kind == Event.RECEIVED:
            received = RECEIVED_FLAGS.unpack(flags)
            if received["first"]:
                self.events.append(ev.FirstPacket(slot.buffer, bool(received["last_buffer"])))
            if received["ldata"] and not received["complete"]:  # complete, its count is news to no one
                self.events.append(ev.LdataSeen(slot.buffer, value))
            if received["complete"]:
                self._completed(index, slot, bool(received["last_buffer"]), value)
            return True
        return False

    def note_high_ack(self, high_ack: int) -> None:
        """RX_HIGH_ACK, read: the newest high-ack the peer's DATA carried."""
        if high_ack == self.stale_high_ack:
            high_ack = 0  # nothing of this connection's acknowledged by DATA yet
        else:
            self.stale_high_ack = None
        self.high_ack = high_ack

    def arriving(self, now: float) -> None:
        """A push brought DATA's events: the peer is alive, whatever the last flush saw. The
        core hears it with a high-ack new to it, or :data:`ALIVE_EVERY` after it last heard."""
        said_at, said_high_ack = self.arriving_said
        if self.high_ack != said_high_ack or now - said_at >= ALIVE_EVERY:
            self.events.append(ev.Arrivals(now, 0.0, self.high_ack))
            self.arriving_said = (now, self.high_ack)

    def arrival_reads(self) -> tuple[list[int], Operations]:
        """The slots still filling whose POST has run, and the reads of their arrivals."""
        receiving = [i for i, slot in self.slots.items() if slot.data is None and slot.ready]
        reads: Operations = []
        for index in receiving:
            reads += [write("STATUS_SLOT", index), read("SLOT_RECEIVED"), read("SLOT_LAST_AT"), read("SLOT_MEAN_GAP")]
        return receiving, reads

    def arrivals(self, receiving: list[int], values: list[int], cycles: int, now: float) -> None:
        """What :meth:`arrival_reads` read, at CYCLES ``cycles``: the newest arrival and its
        slot's mean gap, as :class:`~..protocol.events.Arrivals` (none if nothing came)."""
        clock = self.session.clock
        newest, gap = None, 0.0
        for at, index in enumerate(receiving):
            received, last_at, mean_gap = values[3 * at:3 * at + 3]
            if received:
                seen = now - clock.seconds((cycles - last_at) & 0xFFFF_FFFF)
                if newest is None or seen > newest:
                    # A slot asked for its missing packets timed the wait for them into its
                    # gap: the path's pace is in a slot's first pass (0: the core keeps its own).
                    newest, gap = seen, 0.0 if self.slots[index].queried else clock.seconds(mean_gap)
        if newest is not None:
            self.events.append(ev.Arrivals(newest, gap, self.high_ack))

    # -- inside -------------------------------------------------------------------------------------

    def _completed(self, index: int, slot: ReceivingSlot, last: bool, count: int) -> None:
        """Receive slot ``index`` holds its whole buffer: its data onto the host, then the
        core hears of it. The slot's state is read first, in the download's run: a RECEIVED
        event can come after a query's answer found the buffer whole, the core took it and
        the slot went to the next buffer, which is not whole (its download delivered as that
        buffer failed a transfer's SHA-256 check in CI)."""
        if slot.data is not None or slot.whole:
            self._drop("board completions of a buffer already delivered")
            return
        size = self._buffer_bytes(slot.buffer, last, count)
        # Whole or not; the high-ack the peer's DATA carried, which retires this end's control
        # messages; and, where every packet came in the first pass, the times for the rate selector.
        reads = [write("STATUS_SLOT", index), read("SLOT_STATE"), read("RX_HIGH_ACK")]
        if not slot.queried:
            reads += [read("SLOT_RECEIVED"), read("SLOT_FIRST_AT"), read("SLOT_LAST_AT")]
        data: bytearray | None = None
        if self.drain_on_board:
            values = self.session.operations(reads, wait=True, urgent=True)
        else:
            data, values = self.session.download(index, size, reads)
        state, high_ack, *timing = values
        self.note_high_ack(high_ack)
        if not whole(state):
            self._drop("board completions for a slot given to its next buffer since")
            return
        slot.size = size
        if self.drain_on_board:  # the core hears of it once the board has drained it
            slot.whole, slot.first_pass = True, self._first_pass(timing)
            self._drain_in_order()
            return
        slot.data = data
        self.events.append(ev.BufferComplete(slot.buffer, size, self._first_pass(timing)))

    def _drain_in_order(self) -> None:
        """DRAIN the whole buffers next in the transfer's order (its first is 1): the sink
        port sees the data as it was sent, whatever order its buffers completed in."""
        ready = {slot.buffer: (index, slot) for index, slot in self.slots.items() if slot.whole and not slot.draining}
        while self.next_drain in ready:
            index, slot = ready[self.next_drain]
            slot.draining = True
            self._command(Command.DRAIN, index, slot.buffer - 1, slot.size)
            self.next_drain += 1

    def _drained(self, slot: ReceivingSlot, mismatched_beats: int) -> None:
        """The sink port took the buffer's last word: the core hears the buffer is in."""
        if not slot.draining or slot.data is not None:
            self._drop("board drains never asked for")
            return
        slot.data = DrainedBuffer(slot.size, mismatched_beats)
        self.events.append(ev.BufferComplete(slot.buffer, slot.size, slot.first_pass))

    def _missing(self, kind: int, index: int, value: int) -> None:
        """A query's answer, for the buffer it was asked about: one that was delivered and
        its slot given to the next buffer meanwhile hears nothing."""
        waiting = self.queries.get(index)
        if not waiting:
            self._drop("board missing-packet lists never asked for")
            return
        query = waiting[0]
        if kind == Event.MISSING:
            query.packets.append(value)
            return
        waiting.pop(0)
        slot = self.slots.get(index)
        if slot is None or slot.buffer != query.buffer or slot.data is not None:
            return
        if query.packets:
            self.events.append(ev.MissingPackets(query.buffer, tuple(query.packets)))
        else:
            self._complete_unheard(index, slot)

    def _complete_unheard(self, index: int, slot: ReceivingSlot) -> None:
        """Nothing missing, yet no completion heard: its RECEIVED event was lost to a full
        event FIFO (EVENTS_LOST). The slot's state says whether it is whole."""
        state, count = self.session.operations([write("STATUS_SLOT", index), read("SLOT_STATE"), read("SLOT_COUNT")],
                                               wait=True, urgent=True)
        if whole(state) and slot.data is None:
            self._drop("board completions recovered from a slot's state (its event lost)")
            last = self.transfer_size is not None and slot.buffer * self.buffer_size >= self.transfer_size
            self._completed(index, slot, last, count)

    def _buffer_bytes(self, number: int, last: bool, count: int) -> int:
        if not last:
            return self.buffer_size
        if self.transfer_size:
            return self.transfer_size - (number - 1) * self.buffer_size
        return count * self.packet_size  # unusable (board.py) keeps this from happening

    def _first_pass(self, timing: list[int]) -> ev.FirstPass | None:
        """A loss-free buffer's first pass, from its slot's SLOT_RECEIVED, SLOT_FIRST_AT and
        SLOT_LAST_AT (none for a buffer whose missing packets were asked for)."""
        if not timing:
            return None
        received, first_at, last_at = timing
        return ev.FirstPass(self.session.clock.seconds((last_at - first_at) & 0xFFFF_FFFF), received, 0)

    def _free(self) -> int:
        for index in range(self.session.geometry.rx_slots):
            if index not in self.slots:
                return index
        raise LinkError(f"board {self.session.shown}: every receive slot is in use")

    def _slot_of(self, number: int) -> int | None:
        return next((i for i, slot in self.slots.items() if slot.buffer == number), None)

    def _command(self, op: Command, index: int, arg0: int = 0, arg1: int = 0) -> list[Request | Part]:
        """A command on a receive slot, urgent: they follow no data, and a POST queued
        behind the last buffer's downloads reached the board after the peer, told GO by an
        urgent control packet, had sent the buffer (its DATA was dropped as unposted)."""
        return self.session.submit(command(op, index, arg0, arg1), urgent=True)

    def _drop(self, why: str) -> None:
        self.dropped[why] += 1


def whole(state: int) -> bool:
    """SLOT_STATE says posted (bit 0) and complete (bit 2)."""
    return state & 0b101 == 0b101

