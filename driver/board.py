"""The board data path: the engine's buffer-level calls carried out by the gateware.

Per packet, the board does everything (segmentation, pacing, resends, reassembly,
bitmaps); the host moves whole buffers and commands over the host link
(driver/link.py) and turns the board's pushed events into the engine's. The same
:class:`BoardDataPath` drives a board on a cable and ``netblt sim-board``.

Time: the engine's timers run on the host's clock, since the peer's do too, and
everything measured in board cycles reaches the engine through :class:`BoardClock`,
the measured rate of the board's cycle counter in host seconds. On hardware that is
the board's clock; a simulated board runs thousands of times slower, and the same
conversion makes its arrival gaps, its pacing and what it can take meaningful in real
time (docs/architecture.md).
"""

from __future__ import annotations

import ipaddress
import struct
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..formats import host_link as F
from ..formats.dram_csr import DramPhy
from ..formats.drops import Drop
from ..formats.born import BornBuffer, DrainedBuffer, PatternBuffer, TakenBuffer
from ..formats.registers import (
    ADDRESS, COMMAND_WORD, CONNECTION_FLAGS, DRAM_LEVELS_WORD, ENGINE_STATE, EVENT_WORD, GEOMETRY_WORD,
    RECEIVED_FLAGS, Command, Event, PacingMode,
)
from ..protocol import events as ev
from ..protocol.packets import Packet
from ..protocol.params import Params, burst_for_rate
from .control_codec import ControlCodec
from .dram_levelling import Injector, LevellingFailed, level
from .link import BoardInUse, BoardLink, LinkError, Part, Request
from .transport import Address, Kind

WIRE_BPS = 1e9
"""The board's Ethernet: gigabit."""
DATA_SHARE = 0.9
"""Of the wire, the most a transfer through the board is offered: room for headers
and for the host link's own traffic on the same port."""
CLOCK_BASELINE = 0.3
"""Seconds of host time over which the board's clock is first measured."""
HARDWARE_MATCH = 0.05
"""A measured clock this close to CLOCK_HZ is the board's own: real hardware."""
OPERATIONS = F.MAX_OPERATIONS
RETRY_DATAGRAMS = 4
"""What the retry timer allows between replies, in full datagrams' time: the board runs
requests as they come, so with a whole window in flight each reply still follows the one
before within a few datagrams (a timer of 32, the window, waited 4 s a loss through a
simulated board, and a lossy host link outlived the peer's death timer)."""
HEARTBEAT = 1.0
"""Seconds of host-link silence after which a waiting host says it is still there."""
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
LAST_WORDS = 0.5
"""Seconds a host told to stop still talks to its board: within a second of the signal it
is gone, whatever the board does."""
SOURCE_SILENCE = 5.0
"""Seconds a TAKE may wait on the source port with no word taken before the user hears."""
LEAVE_AT_LEAST = 0.002
"""Shorter than this, a sleep saves no wake."""
HOLD = 5.0
"""Seconds without a word from this host after which another may take the board: a
host that ends its session lets the next one in at once; one that died, after this."""
WAIT_FOR_BOARD = 3 * HOLD
"""Seconds a host waits for a board another host holds: a dead one's HOLD, and the
board's own millisecond after a host leaves (thousands of real ones when simulated)."""


class BoardClock:
    """Board cycles against host seconds, from (host time, CYCLES) samples.

    The 32-bit counter is unwrapped between samples. The rate is measured from the
    first sample, so it grows more exact as the transfer goes on.
    """

    def __init__(self, clock_hz: int) -> None:
        self.clock_hz = clock_hz
        self.first: tuple[float, int] | None = None
        self.last: tuple[float, int] | None = None
        self.rate = float(clock_hz)
        """Board cycles per host second."""
        self.measured = False

    def sample(self, now: float, cycles: int) -> None:
        if self.last is None:
            self.first = self.last = (now, cycles)
            return
        total = self.last[1] + ((cycles - self.last[1]) & 0xFFFF_FFFF)
        self.last = (now, total)
        span = now - self.first[0]
        if span > 0.05:
            measured = (total - self.first[1]) / span
            self.rate = self.clock_hz if abs(measured / self.clock_hz - 1) < HARDWARE_MATCH else measured
            self.measured = True

    @property
    def scale(self) -> float:
        """How fast the board runs against real time: 1 on hardware."""
        return self.rate / self.clock_hz

    def seconds(self, cycles: float) -> float:
        return cycles / self.rate

    def cycles(self, seconds: float) -> int:
        return max(1, round(seconds * self.rate))


@dataclass(frozen=True)
class Geometry:
    """What the board holds, from its registers."""

    tx_slots: int
    rx_slots: int
    slot_bytes: int
    max_packets: int
    beat_bytes: int
    clock_hz: int
    address: str
    fill: bool = False
    """FILL runs: the board makes the test pattern itself."""
    take: bool = False
    """TAKE runs: the board's source port fills slots from its source."""
    sink: bool = False
    """DRAIN runs: the board hands received buffers to gateware on its sink port."""
    check: bool = False
    """A pattern checker watches the sink port."""

    @classmethod
    def read(cls, values: dict[str, int]) -> Geometry:
        """Raises LinkError for registers that describe no engine (a board built from other
        sources, or not a netblt engine), which no transfer could use."""
        g = GEOMETRY_WORD.unpack(values["GEOMETRY"])
        if not (values["CLOCK_HZ"] and g["tx_slots"] and g["rx_slots"] and values["SLOT_BYTES"] and g["data_width"]):
            raise LinkError(f"the board describes no engine: {g['tx_slots']} transmit and {g['rx_slots']} receive "
                            f"slots of {values['SLOT_BYTES']} bytes, {g['data_width']}-bit data, "
                            f"a {values['CLOCK_HZ']} Hz clock")
        return cls(tx_slots=g["tx_slots"], rx_slots=g["rx_slots"], slot_bytes=values["SLOT_BYTES"],
                   max_packets=1 << g["log2_max_packets"], beat_bytes=g["data_width"] // 8,
                   clock_hz=values["CLOCK_HZ"], address=str(ipaddress.IPv4Address(values["IP_ADDRESS"])),
                   fill=bool(g["fill"]), take=bool(g["take"]), sink=bool(g["sink"]), check=bool(g["check"]))


@dataclass
class Slot:
    buffer: int
    size: int = 0
    capacity: int = 0
    sent: bool = False
    taking: bool = False
    """A transmit slot filled by a TAKE: its SEND waits for the source port's words."""
    ahead: bytes | memoryview | None = None
    """Uploaded before the engine handed the buffer over (:meth:`BoardDataPath.load_ahead`):
    these bytes, and no SEND yet."""
    data: bytes | DrainedBuffer | None = None
    whole: bool = False
    """Received whole, and to be drained on the board in its turn; ``first_pass`` is
    reported once it is."""
    draining: bool = False
    """Its DRAIN is queued."""
    first_pass: ev.FirstPass | None = None
    queried: bool = False
    """Its missing packets were asked for: resends came, so its arrivals are no first pass."""
    posted: list[Request | Part] = field(default_factory=list)
    """A receive slot's POST: until the board has run it, the slot's status registers
    are a previous buffer's."""

    @property
    def waiting(self) -> bool:
        """A transmit slot the board is to send and has not yet sent."""
        return not self.sent and self.ahead is None

    @property
    def ready(self) -> bool:
        return all(request.reply is not None for request in self.posted)


DRAM_CSR_SETTLE = 4
"""DRAM_CSR_BUSY reads after each access to the DRAM core's registers: its round trip
across the clocks takes about as long as four register reads."""


class BoardDataPath:
    """A data path on the board at ``link`` (an open session), sending and receiving on its
    NETBLT UDP port ``local_port`` (the NETBLT port too); ``peer`` is where an active end
    opens to. ``notice`` hears one-line notices for the user."""

    name = "board"

    def __init__(self, link: BoardLink, *, local_port: int, kind: Kind = "udp", peer: Address | None = None,
                 notice: Callable[[str], None] = lambda text: None, drain_on_board: bool = False) -> None:
        self.link, self.kind, self.notice = link, kind, notice
        self.drain_on_board = drain_on_board
        """Receiving: the board drains each whole buffer, in the transfer's order, to its
        sink port (DRAIN; the pattern checker watching, where built) and hands on a
        :class:`DrainedBuffer`; the bytes never cross the host link."""
        # The peer's NETBLT port is its UDP port, or natively on IP a header field only.
        address = (_checked_ipv4(peer[0]), peer[1] if kind == "udp" else 0) if peer else None
        self.control = ControlCodec(local_port, peer[1] if peer else 0, address)
        self.dropped: Counter[str] = Counter()
        self.events: list[ev.Event] = []
        # State first: the board may push events left from a previous host during the first reads.
        self.params: Params | None = None
        self.transfer_size: int | None = None
        self.tx: dict[int, Slot] = {}
        self.rx: dict[int, Slot] = {}
        self.uploads: deque[tuple[int, bytes | memoryview, list[F.Operation]]] = deque()
        """Transmit slots waiting for their upload (one a turn of the run loop), their
        data and the SEND that follows it."""
        self.queries: dict[int, list[tuple[int, list[int]]]] = {}
        """Per receive slot, the missing-packet queries not yet answered: (buffer, packets so far)."""
        self.next_drain = 1
        """The buffer the board drains next (``drain_on_board``)."""
        self.resent = 0
        self.resent_at = time.monotonic()
        """When the peer last asked for a resend, or the connection began: a path counts as
        clean once :data:`LOSS_MEMORY` seconds pass without one, not before its first losses
        could be heard of."""
        self.tx_busy = False
        self.source_seen = (time.monotonic(), 0)
        """When SOURCE_TAKEN was last read (or no TAKE waited), and what it said."""
        self.source_silent = False
        self.pace = 0.0
        """Bytes a host second the board sends at, at most: its burst rate or its wire."""
        self.destination: Address | None = None
        self.control_queued = 0
        """Control packets given to the board since the counters were cleared."""
        self.high_ack = 0
        """The high-ack last reported to the engine."""
        self.stale_high_ack: int | None = None
        """RX_HIGH_ACK as the last connection left it, until this one's DATA moves it: the
        board keeps the register across connections."""
        self._board_counts: dict[str, int] = {}
        self.cpu_at_configure = 0.0
        values = self._get("GEOMETRY", "SLOT_BYTES", "CLOCK_HZ", "IP_ADDRESS", "CYCLES")
        self.geometry = Geometry.read(values)
        self.clock = BoardClock(self.geometry.clock_hz)
        self._measure_clock(values["CYCLES"])
        self.link.client.timer.least, self.link.client.give_up = self._link_timers()
        # A push unacknowledged for as long as a request unanswered is sent again (the
        # board's default millisecond pushed each one twice to a host that shared its
        # cores), and as a host that leaves its board alone (twice that: a sleep overruns).
        push_timeout = self.link.client.retry + 2 * LEAVE_CLEAN
        self._set(TAKEOVER_AFTER=max(1, round(HOLD * 1000 * self.clock.scale)),
                  PUSH_TIMEOUT=self.clock.cycles(push_timeout))
        self._ready_dram()
        self._reset_board()
        if peer is not None:
            self._point_at(peer)

    @classmethod
    def open(cls, address: tuple[str, int], *, mtu: int | None = None, notice: Callable[[str], None] = lambda text: None,
             **options) -> BoardDataPath:
        """A session with the board whose host link is at ``address`` (:func:`take`); raises
        LinkError."""
        link = take(address, mtu=mtu, notice=notice)
        try:
            return cls(link, notice=notice, **options)
        except BaseException:
            link.close()
            raise

    # -- what the board can hold -------------------------------------------------------------

    def fit(self, params: Params, *, sending: bool, buffer_size_set: bool = True) -> Params:
        """``params`` restricted to what the board holds (a notice says what changed). A
        sender whose buffer size was not set sends a slot's worth a buffer: a buffer costs
        its host one turn, whatever its size."""
        g = self.geometry
        packet_size = params.packet_size - params.packet_size % g.beat_bytes
        slots = g.tx_slots if sending else g.rx_slots
        largest = min(g.slot_bytes, packet_size * g.max_packets)
        buffer_size = min(params.buffer_size, largest) if buffer_size_set or not sending else largest
        fitted = replace(params, packet_size=packet_size, buffer_size=buffer_size,
                         max_buffers=min(params.max_buffers, slots))
        asked = replace(params, buffer_size=buffer_size) if not buffer_size_set and sending else params
        changes = [f"{what} {getattr(asked, name)} -> {getattr(fitted, name)}"
                   for name, what in (("packet_size", "packet size"), ("buffer_size", "buffer size"),
                                      ("max_buffers", "outstanding buffers"))
                   if getattr(asked, name) != getattr(fitted, name)]
        most = DATA_SHARE * WIRE_BPS * self.clock.scale
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
                        + (f", running {1 / self.clock.scale:,.0f} times slower than real time)"
                           if self.clock.scale < 1 - HARDWARE_MATCH else ")"))
        return fitted

    def unusable(self, params: Params, transfer_size: int | None, sending: bool) -> str | None:
        """Why the board cannot carry a connection with these final values, if it cannot."""
        g = self.geometry
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
        return self.geometry.fill if born is PatternBuffer else self.geometry.take

    def start_stamps(self, bits_per_second: float) -> None:
        """Restart the built-in stamp source at this rate: its words 0, 1, 2 ... one every
        so many cycles of the board's clock (as the host sees it run)."""
        every = min(0xFFFF, self.clock.cycles(8 * self.geometry.beat_bytes / bits_per_second))
        self._set(STAMP_EVERY=every)

    # -- the engine's calls ---------------------------------------------------------------------

    @property
    def peer(self) -> Address | None:
        return self.control.peer

    def configure(self, params: Params, peer: Address, transfer_size: int | None = None) -> None:
        self.params, self.transfer_size = params, transfer_size
        self.resent_at = time.monotonic()
        self.control.configure(peer)
        self._point_at(peer)
        flags = CONNECTION_FLAGS.pack(udp=int(self.kind == "udp"), data_checksum=int(params.data_checksum))
        # Pacing off until the engine sets its rate: that empties the pacer of the grants a
        # previous connection's rate left it, which it would otherwise spend at once (the
        # pacer takes a new rate at its next interval boundary). A buffer uploaded during the
        # OPEN is sent as the rate is set: it once left six packets back to back, its
        # predecessor's burst.
        self._set(PEER_PORT=self.control.foreign_port, PACKET_SIZE=params.packet_size, FLAGS=flags,
                  PACING_MODE=PacingMode.OFF)

    def transmit(self, packet: Packet, to: Address) -> None:
        if to != self.destination:
            if self.control.established:
                self.dropped["control packets to others while busy (not sent)"] += 1
                return
            self._point_at(to)
        data = self.control.encode(packet, to)
        padded = data + bytes(-len(data) % 4)
        words = struct.unpack(f"<{len(padded) // 4}I", padded)  # the engine's lanes: first byte in bits 7:0
        operations = [_write("SEND_DATA", w) for w in words] + [_write("SEND_LENGTH", len(data))]
        self._operations(operations, urgent=True)
        self.control_queued += 1

    def send_buffer(self, number: int, data: bytes | memoryview | BornBuffer, last: bool) -> None:
        """Queue the buffer's upload, and its SEND behind it, for the next turn of the run
        loop (:meth:`wait_events`): one buffer a turn, so a RESEND or OK that came meanwhile
        is acted on between uploads, not after all of them (the engine hands over every
        buffer a GO allows at once: 64 MiB on the Versa). Or have the board make it (its
        pattern source: FILL; its source port: TAKE), with the SEND in one request (the
        board fetches the slot's packets once the slot is written). That follows no
        upload, so it goes as urgent and joins the high-ack stamp that the GO's OK
        brought: one request a buffer."""
        ahead = self._slot_of(self.tx, number)
        if ahead is not None and self._send_ahead(ahead, data, last):
            return
        index = self._free(self.tx, self.geometry.tx_slots, "transmit")
        self.tx[index] = Slot(number, len(data), taking=isinstance(data, TakenBuffer))
        operations = _command(Command.SEND, index, number, len(data), flag=int(last))
        if isinstance(data, PatternBuffer):
            self._submit(_command(Command.FILL, index, data.key, data.length, flag=1) + operations, urgent=True)
        elif isinstance(data, TakenBuffer):
            self._submit(_command(Command.TAKE, index, 0, data.length, flag=1) + operations, urgent=True)
        else:
            self.uploads.append((index, data, operations))
        self.tx_busy = True

    def load_ahead(self, number: int, data: bytes | memoryview) -> None:
        """Upload a buffer before the engine hands it over: the first, while the OPEN is out
        (4 MiB take 43 ms, which a long path's transfer waited before its first DATA). Its
        SEND waits for :meth:`send_buffer` with the same bytes; other bytes (the RESPONSE
        shrank the buffers) are uploaded again, and a slot the engine needs is taken back."""
        index = self._free(self.tx, self.geometry.tx_slots, "transmit")
        self.tx[index] = Slot(number, len(data), ahead=data)
        self.uploads.append((index, data, []))

    def _send_ahead(self, index: int, data: bytes | memoryview | BornBuffer, last: bool) -> bool:
        """Send the buffer loaded ahead into slot ``index`` if ``data`` is what it holds;
        else forget it."""
        slot = self.tx[index]
        if slot.ahead is None or isinstance(data, BornBuffer) or slot.ahead != data:
            self.release(slot.buffer)
            return False
        slot.ahead = None
        operations = _command(Command.SEND, index, slot.buffer, len(data), flag=int(last))
        if any(waiting == index for waiting, _, _ in self.uploads):
            self.uploads = deque((i, d, operations if i == index else ops) for i, d, ops in self.uploads)
        else:
            self._submit(operations)
        self.tx_busy = True
        return True

    def _upload_next(self) -> None:
        """The next buffer waiting for its upload, then its SEND (queued behind the upload)."""
        index, data, operations = self.uploads.popleft()
        self.link.upload(index * self.geometry.slot_bytes // 4, data)
        self._submit(operations)

    def resend(self, number: int, packets: tuple[int, ...]) -> None:
        index = self._slot_of(self.tx, number)
        if index is None or any(index == waiting for waiting, _, _ in self.uploads):
            return  # not the board's, or not sent yet: its first pass carries every packet
        self.resent += len(packets)
        self.resent_at = time.monotonic()
        self.tx_busy = True
        # Urgent: the buffer's SEND ran, so its DATA reached the peer.
        command = _write("COMMAND", COMMAND_WORD.pack(op=Command.RESEND, slot=index))
        self._operations([op for packet in packets for op in (_write("ARG0", packet), command)], urgent=True)

    def release(self, number: int) -> None:
        index = self._slot_of(self.tx, number)
        if index is not None:
            del self.tx[index]
            self.uploads = deque(upload for upload in self.uploads if upload[0] != index)

    def set_rate(self, burst_size: int, burst_interval_ms: int) -> None:
        bursts = burst_size * self.params.packet_size / (burst_interval_ms / 1000)
        self.pace = min(bursts, WIRE_BPS / 8 * self.clock.scale)
        self._set(PACING_MODE=PacingMode.BURSTS, BURST_SIZE=burst_size,
                  BURST_INTERVAL=self.clock.cycles(burst_interval_ms / 1000))

    def stamp_high_ack(self, high_ack: int) -> None:
        self._set(HIGH_ACK=high_ack)

    def post_receive(self, number: int, capacity: int) -> None:
        index = self._free(self.rx, self.geometry.rx_slots, "receive")
        self.rx[index] = Slot(number, capacity=capacity, posted=self._receive_command(Command.POST, index, number))

    def drop_receive(self, number: int) -> None:
        index = self._slot_of(self.rx, number)
        if index is not None:
            del self.rx[index]
            self._receive_command(Command.RELEASE, index)

    def query_missing(self, number: int) -> None:
        index = self._slot_of(self.rx, number)
        if index is not None:
            self.rx[index].queried = True
            self.queries.setdefault(index, []).append((number, []))
            self._receive_command(Command.QUERY_MISSING, index, self.rx[index].capacity)

    def take(self, number: int) -> memoryview | DrainedBuffer:
        slot = self.rx[self._slot_of(self.rx, number)]
        return slot.data if isinstance(slot.data, DrainedBuffer) else memoryview(slot.data)[:slot.size]

    # -- the run loop's calls ---------------------------------------------------------------------

    def wait_events(self, timeout: float) -> list[ev.Event]:
        """Events from the board, waiting up to ``timeout`` seconds for the first."""
        end = time.monotonic() + timeout
        self._watch_source()
        if self.uploads:
            self._upload_next()
            end = time.monotonic()  # the next upload waits for what came meanwhile, not for the timeout
        while True:
            self._pushed(self.link.client.take_pushed())
            if self.events or time.monotonic() >= end:
                break
            if time.monotonic() - self.link.sent_at > HEARTBEAT:
                self.link.client.heartbeat()
            until = min(end, self.link.sent_at + HEARTBEAT)
            if self.link.client.ack_owed:
                # The board has one push out at a time and sends the next when this ACK
                # reaches it: wait that long for it before leaving the board alone (a
                # host that slept here took one OK a sleep, 20 buffers a second).
                until = min(until, time.monotonic() + self.link.client.retry)
            else:
                self._leave_board(end)
            self.link.step(until)
        # What was pushed is acknowledged by the next flush, on the request its events
        # bring (one datagram instead of two), or alone.
        return self.take_events()

    def _leave_board(self, end: float) -> None:
        """Sleep while the board's transmitter has enough queued not to need this host, but
        not past ``end``."""
        now = time.monotonic()
        most = LEAVE_AT_MOST if now - self.resent_at < LOSS_MEMORY else LEAVE_CLEAN
        left = min(unattended([slot.size for slot in self.tx.values() if slot.waiting], self.pace, most), end - now)
        if left >= LEAVE_AT_LEAST:
            self.link.flush()  # the requests and acknowledgements due go first
            time.sleep(left)

    def _watch_source(self) -> None:
        """A TAKE waits as long as its source offers nothing (none connected, or one
        stopped): the user hears of it once the port has taken no word for
        :data:`SOURCE_SILENCE` seconds, and again after words came and stopped."""
        now = time.monotonic()
        if not any(slot.taking and not slot.sent for slot in self.tx.values()):
            self.source_seen = (now, self.source_seen[1])  # a silence counts from a take
            return
        if now < self.source_seen[0] + SOURCE_SILENCE:
            return
        taken = self._get("SOURCE_TAKEN")["SOURCE_TAKEN"]
        silent = taken == self.source_seen[1]
        if silent and not self.source_silent:
            self.notice(f"the board's source port has taken no word for {SOURCE_SILENCE:g} s: its TAKE "
                        "waits for a source to offer some (--source stamps runs the built-in one)")
        self.source_silent, self.source_seen = silent, (now, taken)

    def flush(self) -> list[ev.Event]:
        """Before a timer fires: what the board's slots saw lately (the engine's data and
        death timers need it), and whether the transmit side went idle."""
        receiving = [i for i, slot in self.rx.items() if slot.data is None and slot.ready]
        names = ["CYCLES", "STATE", "RX_HIGH_ACK"]
        operations = [_read(name) for name in names]
        for index in receiving:
            operations += [_write("STATUS_SLOT", index), _read("SLOT_RECEIVED"), _read("SLOT_LAST_AT"),
                           _read("SLOT_MEAN_GAP")]
        # Urgent: a read queued behind a buffer's upload would hold this host, and every
        # RESEND reaching it, for as long as the upload takes.
        values = self._operations(operations, wait=True, urgent=True)
        now = time.monotonic()
        cycles, state, high_ack = values[:3]
        self.clock.sample(now, cycles)
        self._note_high_ack(high_ack)
        newest, gap = None, 0.0
        for at, index in enumerate(receiving):
            received, last_at, mean_gap = values[3 + 3 * at:6 + 3 * at]
            if received:
                ago = (cycles - last_at) & 0xFFFF_FFFF
                seen = now - self.clock.seconds(ago)
                if newest is None or seen > newest:
                    # A slot asked for its missing packets timed the wait for them into its
                    # gap: the path's pace is in a slot's first pass (0: the engine keeps its own).
                    newest, gap = seen, 0.0 if self.rx[index].queried else self.clock.seconds(mean_gap)
        if newest is not None:
            self.events.append(ev.Arrivals(newest, gap, self.high_ack))
        if self.tx_busy and ENGINE_STATE.unpack(state)["tx_idle"] and not any(s.waiting for s in self.tx.values()):
            self.tx_busy = False
            self.events.append(ev.TransmitIdle())
        return self.take_events()

    def take_events(self) -> list[ev.Event]:
        out, self.events = self.events, []
        return out

    def reset(self) -> None:
        """Forget the finished connection; keep the session and the board's port."""
        self.control = self.control.fresh()
        self.params = self.transfer_size = None
        self.tx, self.rx, self.queries, self.uploads = {}, {}, {}, deque()
        self.next_drain = 1
        self.resent, self.tx_busy, self.destination, self.high_ack = 0, False, None, 0
        self.dropped = Counter()
        self._reset_board()

    def interrupt(self) -> None:
        """A signal came: what is left to tell the board (the ABORT, the counters' reads, the
        session's end) has :data:`LAST_WORDS` seconds, then each wait is an error."""
        self.link.deadline = time.monotonic() + LAST_WORDS

    def close(self) -> None:
        """Let what is queued reach the board (a last QUIT or ABORT among it), then end."""
        client = self.link.client
        try:
            self._set(TAKEOVER_AFTER=0, STAMP_EVERY=0)  # the next host need not wait; no stamps offered
            self.link.wait([*client.urgent, *client.waiting, *client.in_flight.values()])
        except LinkError:
            pass  # the board is gone; there is nothing more to tell it
        finally:
            self.link.close()

    # -- the report -------------------------------------------------------------------------------

    def counters(self) -> dict[str, int]:
        """The board's counters for this connection, read now (nothing if the link is gone)."""
        names = ["RX_DUPLICATES", "COMMANDS_REJECTED", "EVENTS_LOST", "SOURCE_TAKEN", "SOURCE_REFUSED"] + \
            [f"DROPPED_{d.name}" for d in Drop]
        try:
            self._board_counts = dict(zip(names, self._operations([_read(n) for n in names], wait=True)))
        except LinkError:
            pass
        return self._board_counts

    def drop_counts(self) -> dict[str, int]:
        counts = self.dropped.copy()
        board = self.counters()
        counts.update({f"board: {d.doc}": board[f"DROPPED_{d.name}"] for d in Drop
                       if board.get(f"DROPPED_{d.name}")})
        for name, what in (("COMMANDS_REJECTED", "board: commands rejected"),
                           ("EVENTS_LOST", "board: events lost")):
            if board.get(name):
                counts[what] = board[name]
        return dict(counts)

    @property
    def duplicates(self) -> int:
        return self._board_counts.get("RX_DUPLICATES", 0)

    def thread_cpu(self) -> float:
        """The board's data path has no host threads: per-packet work costs the host nothing."""
        return 0.0

    @property
    def host_link_bytes(self) -> int:
        return self.link.bytes_in + self.link.bytes_out

    @property
    def host_link_requests(self) -> int:
        return self.link.client.requests

    # -- inside -------------------------------------------------------------------------------------

    def _measure_clock(self, cycles: int) -> None:
        """Sample CYCLES until the rate is known: at once on hardware, a baseline when simulated."""
        self.clock.sample(time.monotonic(), cycles)
        started = time.monotonic()
        while True:
            time.sleep(0.02)
            (cycles,) = self._operations([_read("CYCLES")], wait=True)
            self.clock.sample(time.monotonic(), cycles)
            hardware = self.clock.measured and self.clock.rate == self.clock.clock_hz
            if hardware or time.monotonic() - started > CLOCK_BASELINE:
                return

    def _link_timers(self) -> tuple[float, float]:
        """The host link's retry time: RETRY_DATAGRAMS full datagrams on the wire and back,
        three times over, in the board's time, plus a millisecond for the host. It gives up
        after 20 retries' silence (at least 3 s), well inside a NETBLT death timer."""
        datagrams = RETRY_DATAGRAMS * (self.link.mtu + 38) * 8 / WIRE_BPS
        retry = 0.001 + 3 * datagrams / self.clock.scale
        return retry, max(3.0, 20 * retry)

    def _ready_dram(self) -> None:
        """Slots in DRAM whose reads need levelling, not yet levelled since power-up: level
        them and hand the DRAM to its controller (driver/dram_levelling.py)."""
        values = self._get("DRAM_PHY", "STATE")
        phy = DramPhy.read(values["DRAM_PHY"])
        if not phy.levelling or ENGINE_STATE.unpack(values["STATE"])["slots_ready"]:
            return
        self.notice("levelling the board's DRAM reads (once after power-up: a few seconds)")
        injector = self.dram_injector(phy)
        try:
            levels = level(injector)
        except LevellingFailed as error:
            raise LinkError(f"the board's DRAM: {error}; its slots cannot be used") from None
        self._set(DRAM_LEVELS=DRAM_LEVELS_WORD.pack(**{
            f"{name}{m}": value for m, module in enumerate(levels)
            for name, value in (("delay", module.delay), ("bitslip", module.bitslip), ("levelled", 1))}))
        injector.hand_over()

    def dram_injector(self, phy: DramPhy) -> Injector:
        """LiteDRAM's injector on the board's DRAM core, through the DRAM_CSR registers: an
        access at a time, each waited for (one started while another crosses is ignored)."""

        def access(operations: list[F.Operation]) -> int:
            # A few reads give the access time to cross and come back within the request.
            values = self._operations(operations + [_read("DRAM_CSR_BUSY")] * DRAM_CSR_SETTLE + [_read("DRAM_CSR_DATA")],
                                      wait=True)
            while values[-2]:
                values = self._operations([_read("DRAM_CSR_BUSY"), _read("DRAM_CSR_DATA")], wait=True)
            return values[-1]

        return Injector(phy, lambda address, value: access([_write("DRAM_CSR_ADDRESS", address),
                                                            _write("DRAM_CSR_WRITE", value)]),
                        lambda address: access([_write("DRAM_CSR_ADDRESS", address), _write("DRAM_CSR_READ", 1)]))

    def _reset_board(self) -> None:
        """Release every receive slot and zero the counters: nothing left from before."""
        operations = [_write("COMMAND", COMMAND_WORD.pack(op=Command.RELEASE, slot=i))
                      for i in range(self.geometry.rx_slots)]
        flags = CONNECTION_FLAGS.pack(udp=int(self.kind == "udp"))
        port = self.control.local_port
        operations += [_write("COUNTERS_CLEAR", 1), _write("LOCAL_PORT", port), _write("UDP_LOCAL_PORT", port),
                       _write("FLAGS", flags), _write("PEER_ADDRESS", 0), _write("HIGH_ACK", 0), _read("RX_HIGH_ACK")]
        (self.stale_high_ack,) = self._operations(operations, wait=True)
        self.control_queued = 0

    def _point_at(self, to: Address) -> None:
        """Control packets (and DATA) go to ``to`` from now on: once the board has sent
        those already queued for the last destination."""
        if to == self.destination:
            return
        if self.destination is not None and self.control_queued:
            deadline = time.monotonic() + self.link.client.give_up
            while self._operations([_read("TX_CONTROL")], wait=True, urgent=True)[0] < self.control_queued:
                if time.monotonic() > deadline:
                    raise LinkError(f"board {self.link.shown}: its control packets do not leave")
        self.destination = to
        self._set(PEER_ADDRESS=int(ipaddress.IPv4Address(to[0])), UDP_PEER_PORT=to[1])

    def _note_high_ack(self, high_ack: int) -> None:
        """RX_HIGH_ACK, read: the newest high-ack the peer's DATA carried."""
        if high_ack == self.stale_high_ack:
            high_ack = 0  # nothing of this connection's acknowledged by DATA yet
        else:
            self.stale_high_ack = None
        self.high_ack = high_ack

    def _pushed(self, pushed) -> None:
        arriving = False
        for word in pushed.events:
            event = EVENT_WORD.unpack(word)
            arriving |= event["kind"] == Event.RECEIVED and event["slot"] in self.rx  # not a stale one
            self._event(event)
        if arriving:
            # DATA is arriving now: the peer is alive, whatever the last flush saw.
            self.events.append(ev.Arrivals(time.monotonic(), 0.0, self.high_ack))
        for record in pushed.packets:
            source = (str(ipaddress.IPv4Address(record.address)), record.port if self.kind == "udp" else 0)
            packet = self.control.decode(record.packet, source, self.dropped)
            if packet is not None:
                self.events.append(ev.PacketReceived(packet, source))

    def _event(self, event: dict[str, int]) -> None:
        kind, index = event["kind"], event["slot"]
        if kind == Event.SENT:
            if index in self.tx:
                self.tx[index].sent = True
                if not self.resent and not any(slot.waiting for slot in self.tx.values()):
                    self.tx_busy = False
                    self.events.append(ev.TransmitIdle())
            return
        if kind in (Event.MISSING, Event.MISSING_END):
            self._missing(kind, index, event["value"])
            return
        slot = self.rx.get(index)
        if slot is None:
            self.dropped["board events for a released slot"] += 1
            return
        if kind == Event.DRAINED:
            self._drained(slot, event["value"])
            return
        if kind == Event.RECEIVED:
            flags = RECEIVED_FLAGS.unpack(event["flags"])
            if flags["first"]:
                self.events.append(ev.FirstPacket(slot.buffer, bool(flags["last_buffer"])))
            if flags["ldata"]:
                self.events.append(ev.LdataSeen(slot.buffer, event["value"]))
            if flags["complete"]:
                self._completed(index, slot, bool(flags["last_buffer"]), event["value"])

    def _completed(self, index: int, slot: Slot, last: bool, count: int) -> None:
        """Receive slot ``index`` holds its whole buffer: its data onto the host, then the
        engine hears of it. The slot's state is read first, in the download's run: a
        RECEIVED event can come after a query's answer found the buffer whole, the engine
        took it and the slot went to the next buffer, which is not whole (its download
        delivered as that buffer failed a transfer's SHA-256 check in CI)."""
        if slot.data is not None or slot.whole:
            self.dropped["board completions of a buffer already delivered"] += 1
            return
        size = self._buffer_bytes(slot.buffer, last, count)
        # Whole or not; the high-ack the peer's DATA carried, which retires this end's control
        # messages; and, where every packet came in the first pass, the times for the rate selector.
        reads = [_write("STATUS_SLOT", index), _read("SLOT_STATE"), _read("RX_HIGH_ACK")]
        if not slot.queried:
            reads += [_read("SLOT_RECEIVED"), _read("SLOT_FIRST_AT"), _read("SLOT_LAST_AT")]
        if self.drain_on_board:
            data, values = None, self._operations(reads, wait=True, urgent=True)
        else:
            first = Request(F.Type.REGISTERS, F.encode_operations(reads))
            data = self.link.download(index * self.geometry.slot_bytes // 4, size, first=first)
            values = [op.value for op in F.decode_operations(first.reply[1]) if op.opcode & ~F.DONE == F.Opcode.READ]
        state, high_ack, *timing = values
        self._note_high_ack(high_ack)
        if not _whole(state):
            self.dropped["board completions for a slot given to its next buffer since"] += 1
            return
        slot.size = size
        if self.drain_on_board:  # the engine hears of it once the board has drained it
            slot.whole, slot.first_pass = True, self._first_pass(timing)
            self._drain_in_order()
            return
        slot.data = data
        self.events.append(ev.BufferComplete(slot.buffer, size, self._first_pass(timing)))

    def _drain_in_order(self) -> None:
        """DRAIN the whole buffers next in the transfer's order (its first is 1): the sink
        port sees the data as it was sent, whatever order its buffers completed in."""
        whole = {slot.buffer: (index, slot) for index, slot in self.rx.items() if slot.whole and not slot.draining}
        while self.next_drain in whole:
            index, slot = whole[self.next_drain]
            slot.draining = True
            self._receive_command(Command.DRAIN, index, slot.buffer - 1, slot.size)
            self.next_drain += 1

    def _drained(self, slot: Slot, mismatched_beats: int) -> None:
        """The sink port took the buffer's last word: the engine hears the buffer is in."""
        if not slot.draining or slot.data is not None:
            self.dropped["board drains never asked for"] += 1
            return
        slot.data = DrainedBuffer(slot.size, mismatched_beats)
        self.events.append(ev.BufferComplete(slot.buffer, slot.size, slot.first_pass))

    def _missing(self, kind: Event, index: int, value: int) -> None:
        """A query's answer, for the buffer it was asked about: one that was delivered and
        its slot given to the next buffer meanwhile hears nothing."""
        waiting = self.queries.get(index)
        if not waiting:
            self.dropped["board missing-packet lists never asked for"] += 1
            return
        number, packets = waiting[0]
        if kind == Event.MISSING:
            packets.append(value)
            return
        waiting.pop(0)
        slot = self.rx.get(index)
        if slot is None or slot.buffer != number or slot.data is not None:
            return
        if packets:
            self.events.append(ev.MissingPackets(number, tuple(packets)))
        else:
            self._complete_unheard(index, slot)

    def _complete_unheard(self, index: int, slot: Slot) -> None:
        """Nothing missing, yet no completion heard: its RECEIVED event was lost to a full
        event FIFO (EVENTS_LOST). The slot's state says whether it is whole."""
        values = self._operations([_write("STATUS_SLOT", index), _read("SLOT_STATE"), _read("SLOT_COUNT")],
                                  wait=True, urgent=True)
        if _whole(values[0]) and slot.data is None:
            self.dropped["board completions recovered from a slot's state (its event lost)"] += 1
            p = self.params
            self._completed(index, slot, slot.buffer * p.buffer_size >= self.transfer_size, values[1])

    def _buffer_bytes(self, number: int, last: bool, count: int) -> int:
        p = self.params
        if not last:
            return p.buffer_size
        if self.transfer_size:
            return self.transfer_size - (number - 1) * p.buffer_size
        return count * p.packet_size  # unusable() keeps this from happening

    def _first_pass(self, timing: list[int]) -> ev.FirstPass | None:
        """A loss-free buffer's first pass, from its slot's SLOT_RECEIVED, SLOT_FIRST_AT and
        SLOT_LAST_AT (none for a buffer whose missing packets were asked for)."""
        if not timing:
            return None
        received, first_at, last_at = timing
        return ev.FirstPass(self.clock.seconds((last_at - first_at) & 0xFFFF_FFFF), received, 0)

    def _free(self, slots: dict[int, Slot], count: int, side: str) -> int:
        for index in range(count):
            if index not in slots:
                return index
        ahead = next((i for i, slot in slots.items() if slot.ahead is not None), None)
        if ahead is not None:  # loaded ahead, never handed over (its buffer was held already)
            self.release(slots[ahead].buffer)
            return ahead
        raise LinkError(f"board {self.link.shown}: every {side} slot is in use")

    @staticmethod
    def _slot_of(slots: dict[int, Slot], number: int) -> int | None:
        return next((i for i, slot in slots.items() if slot.buffer == number), None)

    def _receive_command(self, op: Command, index: int, arg0: int = 0, arg1: int = 0) -> list[Request | Part]:
        """A command on a receive slot, urgent: they follow no data, and a POST queued
        behind the last buffer's downloads reached the board after the peer, told GO by an
        urgent control packet, had sent the buffer (its DATA was dropped as unposted). A
        SEND instead keeps its place behind the upload it follows."""
        return self._submit(_command(op, index, arg0, arg1), urgent=True)

    def _set(self, **registers: int) -> None:
        self._operations([_write(name, value) for name, value in registers.items()], urgent=True)

    def _get(self, *names: str) -> dict[str, int]:
        return dict(zip(names, self._operations([_read(n) for n in names], wait=True, urgent=True)))

    def _operations(self, operations: list[F.Operation], wait: bool = False, urgent: bool = False) -> list[int]:
        """Queue register operations (as few requests as fit); with ``wait``, their read
        values. Urgent ones go ahead of uploads and downloads queued (settings, reads,
        resends and control packets: none needs a transfer of data done first); commands
        on slots keep their place behind the data they follow."""
        requests = self._submit(operations, urgent)
        if not wait:
            return []
        replies = self.link.wait(requests)
        self._pushed(self.link.client.take_pushed())
        return [op.value for _, body in replies for op in F.decode_operations(body)
                if op.opcode & ~F.DONE == F.Opcode.READ]

    def _submit(self, operations: list[F.Operation], urgent: bool = False) -> list[Request | Part]:
        return self.link.submit([(F.Type.REGISTERS, F.encode_operations(operations[at:at + OPERATIONS]), 0)
                                 for at in range(0, len(operations), OPERATIONS)], join=True, urgent=urgent)


def take(address: tuple[str, int], *, mtu: int | None = None,
         notice: Callable[[str], None] = lambda text: None) -> BoardLink:
    """A session with the board at ``address`` in datagrams of ``mtu`` bytes (None: the
    largest that reach it, :meth:`BoardLink.fit_mtu`), taken from a host that left or has
    been silent for HOLD seconds, waiting WAIT_FOR_BOARD at most (and saying so); raises
    LinkError."""
    link = BoardLink(address, give_up=2 * HOLD)  # until the board's clock is known
    try:
        link.fit_mtu(mtu)
        # A host that just left has given the board up, but only after one more of the
        # board's milliseconds: thousands of real ones on a simulated board.
        deadline, told = time.monotonic() + WAIT_FOR_BOARD, False
        while True:
            try:
                link.open(take_over=True)
                return link
            except BoardInUse as exc:
                if time.monotonic() > deadline:
                    raise BoardInUse(f"{exc}, after {WAIT_FOR_BOARD:g} s of waiting (a netblt host frees it "
                                     f"as it ends, or by {HOLD:g} s of silence if it died)") from None
                if not told:
                    notice(f"{exc}; waiting up to {WAIT_FOR_BOARD:g} s for it to end its session or go "
                           f"silent for {HOLD:g} s")
                    told = True
                time.sleep(0.1)
    except BaseException:
        link.close()
        raise


def leave(link: BoardLink) -> None:
    """End a session as a netblt host does: what is queued reaches the board, and the next
    host may take it at once."""
    try:
        link.many([(F.Type.REGISTERS, F.encode_operations([_write("TAKEOVER_AFTER", 0)]), 0)])
    finally:
        link.close()


def unattended(queued: list[int], pace: float, most: float) -> float:
    """Seconds a board can be left with buffers of ``queued`` bytes given to it and not yet
    sent, at ``pace`` bytes a second: half what they take, less the one it may be finishing
    (0 with no pace known), at most ``most``."""
    if len(queued) < 2 or not pace:
        return 0.0
    return min((sum(queued) - max(queued)) / pace / 2, most)


def _whole(state: int) -> bool:
    """SLOT_STATE says posted (bit 0) and complete (bit 2)."""
    return state & 0b101 == 0b101


def _command(op: Command, index: int, arg0: int = 0, arg1: int = 0, flag: int = 0) -> list[F.Operation]:
    return [_write("ARG0", arg0), _write("ARG1", arg1), _write("COMMAND", COMMAND_WORD.pack(op=op, slot=index, flag=flag))]


def _write(name: str, value: int) -> F.Operation:
    return F.Operation(F.Opcode.WRITE, ADDRESS[name], value & 0xFFFF_FFFF)


def _read(name: str) -> F.Operation:
    return F.Operation(F.Opcode.READ, ADDRESS[name])


def _checked_ipv4(host: str) -> str:
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        raise LinkError(f"a board speaks IPv4 only; {host} is not an IPv4 address") from None
