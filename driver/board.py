"""The board data path: the protocol core's buffer-level calls carried out by the gateware.

Per packet, the board does everything (segmentation, pacing, resends, reassembly,
bitmaps); the host moves whole buffers and commands over the host link and turns the
board's pushed events into the core's. One object a part of the board, as a NIC's driver
has: the session (driver/board_session.py: the host link, the board's geometry and
clock, register operations), the transmit side (driver/board_transmit.py) and the
receive side (driver/board_receive.py); :class:`BoardDataPath` joins them under the
interface every real-time data path offers (driver/realtime.py), for a board on a
cable and ``netblt sim-board`` alike.

The core's timers run on the host's clock, since the peer's do too; what the board
measures in cycles reaches it through the session's :class:`~.board_session.BoardClock`.
"""

from __future__ import annotations

import ipaddress
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..formats.born import BornBuffer, DrainedBuffer, PatternBuffer
from ..formats.registers import (COMMAND_WORD, CONNECTION_FLAGS, DROP_COUNTERS, ENGINE_STATE, EVENT_WORD, Command,
                                 Event, PacingMode, dotted_quad)
from ..protocol import events as ev
from ..protocol.packets import Packet
from ..protocol.params import Params, burst_for_rate
from .board_receive import ReceiveSlots
from .board_session import HARDWARE_MATCH, WIRE_BPS, BoardSession, read, take, write
from .board_transmit import LEAVE_AT_LEAST, LEAVE_CLEAN, TransmitSlots
from .control_codec import ControlCodec
from .link import BoardLink
from .link_client import LinkError, Pushed
from .transport import Address, Kind, socket_address

DATA_SHARE = 0.9
"""Of the wire, the most a transfer through the board is offered: room for headers
and for the host link's own traffic on the same port."""
HEARTBEAT = 1.0
"""Seconds of host-link silence after which a waiting host says it is still there."""
COUNTERS = ["RX_DUPLICATES", "COMMANDS_REJECTED", "EVENTS_LOST", "SOURCE_TAKEN", "SOURCE_REFUSED", *DROP_COUNTERS]
"""The board's counters a report reads."""


class BoardDataPath:
    """A data path on the board at ``link`` (an open session), sending and receiving on its
    NETBLT UDP port ``local_port`` (the NETBLT port too); ``peer`` is where an active end
    opens to. ``notice`` hears one-line notices for the user; ``drain_on_board``: a
    receiving board drains each whole buffer to its sink port (driver/board_receive.py)."""

    name = "board"

    def __init__(self, link: BoardLink, *, local_port: int, kind: Kind = "udp", peer: Address | None = None,
                 notice: Callable[[str], None] = lambda text: None, drain_on_board: bool = False) -> None:
        self.kind, self.notice = kind, notice
        # The peer's NETBLT port is its UDP port, or natively on IP a header field only.
        address = (_checked_ipv4(peer[0]), peer[1] if kind == "udp" else 0) if peer else None
        self.control = ControlCodec(local_port, peer[1] if peer else 0, address)
        self.dropped: Counter[str] = Counter()
        self.events: list[ev.Event] = []
        self.session = BoardSession(link, notice)
        self.sending = TransmitSlots(self.session, self.events, notice)
        self.receiving = ReceiveSlots(self.session, self.events, self.dropped, drain_on_board)
        self.session.listen(self._pushed)  # a previous host's events, if the board still held some: nothing here
        self.params: Params | None = None
        self.destination: Address | None = None
        self.control_queued = 0
        """Control packets given to the board since the counters were cleared."""
        self._board_counts: dict[str, int] = {}
        self.cpu_at_configure = 0.0
        # A push unacknowledged for as long as a request unanswered is sent again (the
        # board's default millisecond pushed each one twice to a host that shared its
        # cores), and as a host that leaves its board alone (twice that: a sleep overruns).
        self.session.set(PUSH_TIMEOUT=self.session.clock.cycles(self.link.client.retry + 2 * LEAVE_CLEAN))
        self.session.ready_dram()
        self._reset_board()
        if peer is not None:
            self._point_at(peer)

    @classmethod
    def open(cls, address: tuple[str, int], *, mtu: int | None = None,
             notice: Callable[[str], None] = lambda text: None, **options: Any) -> BoardDataPath:
        """A session with the board whose host link is at ``address`` (board_session.take);
        raises LinkError."""
        link = take(address, mtu=mtu, notice=notice)
        try:
            return cls(link, notice=notice, **options)
        except BaseException:
            link.close()
            raise

    @property
    def link(self) -> BoardLink:
        return self.session.link

    # -- what the board can hold -------------------------------------------------------------

    def fit(self, params: Params, *, sending: bool, defaults: frozenset[str] = frozenset()) -> Params:
        """``params`` restricted to what the board holds (a notice says what changed). A
        sender's buffer size and outstanding buffers left at their ``defaults`` fill the
        board's slots, all of them: a buffer costs its host one turn, whatever its size,
        and the more the board holds, the longer its host may leave it alone."""
        g, scale = self.session.geometry, self.session.clock.scale
        packet_size = params.packet_size - params.packet_size % g.beat_bytes
        slots = g.tx_slots if sending else g.rx_slots
        largest = min(g.slot_bytes, packet_size * g.max_packets)
        asked = params
        if sending and "buffer_size" in defaults:
            asked = replace(asked, buffer_size=largest)
        if sending and "max_buffers" in defaults:
            asked = replace(asked, max_buffers=slots)
        fitted = replace(asked, packet_size=packet_size, buffer_size=min(asked.buffer_size, largest),
                         max_buffers=min(asked.max_buffers, slots))
        changes = [f"{what} {getattr(asked, name)} -> {getattr(fitted, name)}"
                   for name, what in (("packet_size", "packet size"), ("buffer_size", "buffer size"),
                                      ("max_buffers", "outstanding buffers"))
                   if getattr(asked, name) != getattr(fitted, name)]
        most = DATA_SHARE * WIRE_BPS * scale
        if (fitted.rate_bps if sending else params.rate_cap) > most:
            changes.append(f"rate at most {most / 1e6:.3g} Mb/s")
            if sending:
                burst_size, burst_interval = burst_for_rate(most, packet_size)
                fitted = replace(fitted, burst_size=burst_size, burst_interval=burst_interval)
            else:
                fitted = replace(fitted, rate_cap=most)
        if changes:
            self.notice(f"the board holds less than asked: {', '.join(changes)} "
                        f"({slots} slots of {g.slot_bytes} bytes"
                        + (f", running {1 / scale:,.0f} times slower than real time)"
                           if scale < 1 - HARDWARE_MATCH else ")"))
        return fitted

    def unusable(self, params: Params, transfer_size: int | None, sending: bool) -> str | None:
        """Why the board cannot carry a connection with these final values, if it cannot."""
        g = self.session.geometry
        if params.packet_size % g.beat_bytes:
            return f"the board needs a packet size that is a multiple of {g.beat_bytes} bytes, not {params.packet_size}"
        if params.buffer_size > g.slot_bytes or params.packets_per_buffer > g.max_packets:
            return f"a buffer of {params.buffer_size} bytes does not fit the board's {g.slot_bytes}-byte slots"
        if not sending and not transfer_size:
            # The board does not report the LDATA's length: the size says how long the last buffer is.
            return "a receiving board needs the transfer's size: it cannot take a stream or a file of 4 GiB or more"
        return None

    def makes(self, born: type[BornBuffer]) -> bool:
        """It can send such a buffer: the board has a pattern source, or a source port."""
        return self.session.geometry.fill if born is PatternBuffer else self.session.geometry.take

    def drain_lacks(self, checked: bool) -> str | None:
        """What the board lacks to drain received buffers to its sink port (``checked``:
        with its pattern checker watching), if anything."""
        g = self.session.geometry
        return "sink port" if not g.sink else "pattern checker" if checked and not g.check else None

    def start_stamps(self, bits_per_second: float) -> None:
        self.sending.start_stamps(bits_per_second)

    @property
    def peer(self) -> ev.Address:
        return self.control.peer

    @property
    def local_port(self) -> int:
        return self.control.local_port

    @property
    def address(self) -> str:
        """Where peers reach it: the board's own IPv4 address."""
        return self.session.geometry.address

    # -- the protocol core's calls ------------------------------------------------------------------

    def configure(self, params: Params, peer: ev.Address, transfer_size: int | None = None) -> None:
        self.params = params
        self.sending.configure()
        self.receiving.configure(params.buffer_size, params.packet_size, transfer_size)
        self.control.configure(peer)
        self._point_at(socket_address(peer))
        flags = CONNECTION_FLAGS.pack(udp=int(self.kind == "udp"), data_checksum=int(params.data_checksum))
        # Pacing off until the core sets its rate: that empties the pacer of the grants a
        # previous connection's rate left it, which it would otherwise spend at once (the
        # pacer takes a new rate at its next interval boundary). A buffer uploaded during the
        # OPEN is sent as the rate is set: it once left six packets back to back, its
        # predecessor's burst.
        self.session.set(PEER_PORT=self.control.foreign_port, PACKET_SIZE=params.packet_size, FLAGS=flags,
                         PACING_MODE=PacingMode.OFF)

    def transmit(self, packet: Packet, to: ev.Address) -> None:
        if to != self.destination:
            if self.control.established:
                self.dropped["control packets to others while busy (not sent)"] += 1
                return
            self._point_at(socket_address(to))
        data = self.control.encode(packet, to)
        self.session.write_words("SEND_DATA", data, [write("SEND_LENGTH", len(data))])
        self.control_queued += 1

    def send_buffer(self, number: int, data: bytes | memoryview | BornBuffer, last: bool) -> None:
        self.sending.send_buffer(number, data, last)

    def load_ahead(self, number: int, data: bytes | memoryview) -> None:
        self.sending.load_ahead(number, data)

    def resend(self, number: int, packets: tuple[int, ...]) -> None:
        self.sending.resend(number, packets)

    def release(self, number: int) -> None:
        self.sending.release(number)

    def set_rate(self, burst_size: int, burst_interval_ms: int) -> None:
        assert self.params is not None  # configured: the core sets a rate once established
        self.sending.set_rate(burst_size, burst_interval_ms, self.params.packet_size)

    def stamp_high_ack(self, high_ack: int) -> None:
        self.session.set(HIGH_ACK=high_ack)

    def post_receive(self, number: int, capacity: int) -> None:
        self.receiving.post(number, capacity)

    def drop_receive(self, number: int) -> None:
        self.receiving.drop(number)

    def query_missing(self, number: int) -> None:
        self.receiving.query_missing(number)

    def take(self, number: int) -> memoryview | DrainedBuffer:
        return self.receiving.take(number)

    # -- the run loop's calls ---------------------------------------------------------------------

    def wait_events(self, timeout: float) -> list[ev.Event]:
        """Events from the board, waiting up to ``timeout`` seconds for the first; the next
        buffer's upload first, if one waits (then no longer than it takes)."""
        link, client = self.link, self.link.client
        end = time.monotonic() + timeout
        self.sending.watch_source()
        if self.sending.upload_next():
            end = time.monotonic()  # the next upload waits for what came meanwhile, not for the timeout
        while True:
            self._pushed(client.take_pushed())
            if not self._idle_only() or time.monotonic() >= end:
                break
            if time.monotonic() - link.sent_at > HEARTBEAT:
                client.heartbeat()
            # A push holds every control packet the board had (one wake for all): the next
            # comes as this one's ACK reaches the board, and waits for the next wake.
            self._leave_board(end)
            link.step(min(end, link.sent_at + HEARTBEAT))
        # What was pushed is acknowledged by the next flush, on the request its events
        # bring (one datagram instead of two), or alone.
        return self.take_events()

    def _idle_only(self) -> bool:
        """No event, or TransmitIdle alone: the sending core acts on that only at its next
        timer (its keepalive) or control message, each of which ends the wait anyway, so it
        waits for them instead of costing a turn of the run loop of its own (the push of a
        SENT event, which a buffer's QUIET upload and SEND leave to answer them)."""
        return all(isinstance(event, ev.TransmitIdle) for event in self.events)

    def _leave_board(self, end: float) -> None:
        """Sleep while the board's transmitter has enough queued not to need this host, but
        not past ``end`` (interrupt moderation, as a NIC's)."""
        now = time.monotonic()
        left = min(self.sending.unattended(now), end - now)
        if left >= LEAVE_AT_LEAST:
            self.link.flush()  # the requests and acknowledgements due go first
            time.sleep(left)

    def flush(self) -> list[ev.Event]:
        """Before a timer fires: what the board's slots saw lately (the core's data and
        death timers need it), and whether the transmit side went idle."""
        receiving, reads = self.receiving.arrival_reads()
        # Urgent: a read queued behind a buffer's upload would hold this host, and every
        # RESEND reaching it, for as long as the upload takes.
        cycles, state, high_ack, *values = self.session.operations(
            [read("CYCLES"), read("STATE"), read("RX_HIGH_ACK"), *reads], wait=True, urgent=True)
        now = time.monotonic()
        self.session.clock.sample(now, cycles)
        self.receiving.note_high_ack(high_ack)
        self.receiving.arrivals(receiving, values, cycles, now)
        self.sending.went_idle(bool(ENGINE_STATE.unpack(state)["tx_idle"]))
        return self.take_events()

    def take_events(self) -> list[ev.Event]:
        out = self.events[:]
        self.events.clear()
        return out

    def reset(self) -> None:
        """Forget the finished connection; keep the session and the board's port."""
        self.control = self.control.fresh()
        self.params, self.destination = None, None
        self.dropped.clear()
        self._reset_board()

    def interrupt(self) -> None:
        self.session.interrupt()

    def close(self) -> None:
        """Let what is queued reach the board (a last QUIT or ABORT among it), then end;
        the stamp source stops offering."""
        self.session.close(STAMP_EVERY=0)

    # -- the report -------------------------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        """The board's counters for this connection, read now (those read last if the link
        is gone)."""
        try:
            self._board_counts = dict(zip(COUNTERS, self.session.operations([read(n) for n in COUNTERS], wait=True)))
        except LinkError:
            pass
        return self._board_counts

    def drop_counts(self) -> dict[str, int]:
        counts = self.dropped.copy()
        board = self.counters()
        counts.update({f"board: {d.doc}": board[name] for name, d in DROP_COUNTERS.items() if board.get(name)})
        for name, what in (("COMMANDS_REJECTED", "board: commands rejected"),
                           ("EVENTS_LOST", "board: events lost")):
            if board.get(name):
                counts[what] = board[name]
        return dict(counts)

    @property
    def duplicates(self) -> int:
        return self._board_counts.get("RX_DUPLICATES", 0)

    @property
    def resent(self) -> int:
        return self.sending.resent

    def thread_cpu(self) -> float:
        """The board's data path has no host threads: per-packet work costs the host nothing."""
        return 0.0

    @property
    def host_link_bytes(self) -> int:
        return int(self.link.bytes_in + self.link.bytes_out)

    @property
    def host_link_requests(self) -> int:
        return int(self.link.client.requests)

    @property
    def host_link_slow_path(self) -> int:
        return int(self.link.client.received)

    @property
    def link_mtu(self) -> int | None:
        return self.link.mtu

    # -- inside -------------------------------------------------------------------------------------

    def _pushed(self, pushed: Pushed) -> None:
        """What the board pushed, to the side it concerns; control packets to the core."""
        arriving = False
        for word in pushed.events:
            event = EVENT_WORD.unpack(word)
            if event["kind"] == Event.SENT:
                self.sending.sent(event["slot"])
            else:
                arriving |= self.receiving.event(event["kind"], event["slot"], event["flags"], event["value"])
        if arriving:
            self.receiving.arriving(time.monotonic())
        for record in pushed.packets:
            source = (dotted_quad(record.address), record.port if self.kind == "udp" else 0)
            packet = self.control.decode(record.packet, source, self.dropped)
            if packet is not None:
                self.events.append(ev.PacketReceived(packet, source))

    def _reset_board(self) -> None:
        """Release every receive slot and zero the counters: nothing left from before."""
        operations = [write("COMMAND", COMMAND_WORD.pack(op=Command.RELEASE, slot=i))
                      for i in range(self.session.geometry.rx_slots)]
        flags = CONNECTION_FLAGS.pack(udp=int(self.kind == "udp"))
        port = self.control.local_port
        operations += [write("COUNTERS_CLEAR", 1), write("LOCAL_PORT", port), write("UDP_LOCAL_PORT", port),
                       write("FLAGS", flags), write("PEER_ADDRESS", 0), write("HIGH_ACK", 0), write("PUSH_HOLD", 0),
                       read("RX_HIGH_ACK")]
        (stale_high_ack,) = self.session.operations(operations, wait=True)
        self.sending.reset()
        self.receiving.reset(stale_high_ack)
        self.control_queued = 0

    def _point_at(self, to: Address) -> None:
        """Control packets (and DATA) go to ``to`` from now on: once the board has sent
        those already queued for the last destination."""
        if to == self.destination:
            return
        if self.destination is not None and self.control_queued:
            deadline = time.monotonic() + self.link.client.give_up
            while self.session.operations([read("TX_CONTROL")], wait=True, urgent=True)[0] < self.control_queued:
                if time.monotonic() > deadline:
                    raise LinkError(f"board {self.session.shown}: its control packets do not leave")
        self.destination = to
        self.session.set(PEER_ADDRESS=int(ipaddress.IPv4Address(to[0])), UDP_PEER_PORT=to[1])


def _checked_ipv4(host: str) -> str:
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        raise LinkError(f"a board speaks IPv4 only; {host} is not an IPv4 address") from None
