"""The engine of a board as a functional model: registers, commands, events, slots.

It does what gateware/engine.py does, per formats/registers.py, at host speed and with
no I/O: datagrams come in through :meth:`EngineModel.arrive` and go out through
:meth:`EngineModel.outgoing`, each with the host's time. Segmentation is the project's
compiled packer (driver/framing.py) and placing the compiled reassembly core
(driver/receive_buffers.py), so the model keeps up with a gigabit where Python per
packet would not. Where the gateware counts a drop, the model counts the same one.
"""

from __future__ import annotations

import ipaddress
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ...driver import receive_buffers
from ...driver.framing import HEADER_SIZE, pack
from ...driver.pattern import fill_pattern, pattern, stamps
from ...formats import ethernet, rfc998 as L
from ...formats.boards import MAC_ADDRESS, SlotGeometry
from ...formats.checksum import internet_checksum
from ...formats.drops import Drop
from ...formats.host_link import ControlPacket
from ...formats.registers import (
    ADDRESS, COMMAND_WORD, CONNECTION_FLAGS, DROP_COUNTERS, ENGINE_REGISTERS, ENGINE_STATE, EVENT_WORD, GEOMETRY_WORD,
    RECEIVED_FLAGS, Command, Event, PacingMode,
)

WIRE_BPS = 1e9
FRAME_OVERHEAD = ethernet.FRAMING + 20 + 8
"""Bytes on the wire besides a UDP payload: Ethernet's framing, IP, UDP."""
LATE_AT_MOST = 0.02
"""Seconds a DATA packet the loop came to late may still start at its paced time: a
board's pacer never waits, but this loop does, for a 4 MiB slot's fill (some 6 ms), a
batch of 256 DATA packets (some 3 ms) or a busy machine. With a millisecond, such waits
cost the pace a board keeps: 250 Mb/s of a 297 Mb/s pace, 84%, through 4 MiB slots
(docs/benchmarks.md)."""
EVENT_DEPTH = 512
"""EVENT words the FIFO holds (the gateware's fifo_depth)."""
CONTROL_DEPTH = 16
"""Received control packets waiting for the host at most."""
SLOTS_DROPS = {"truncated": Drop.SHORT, "version": Drop.VERSION, "length": Drop.LENGTH, "checksum": Drop.CHECKSUM,
               "data checksum": Drop.DATA_CHECKSUM, "ports": Drop.CONNECTION, "unknown buffer": Drop.UNPOSTED,
               "outside buffer": Drop.OUTSIDE, "data length": Drop.LENGTH, "past ldata": Drop.PAST_LDATA}
"""The reassembly core's drop reasons, as the board counts them."""

PEER_REGISTERS = frozenset({"PEER_ADDRESS", "UDP_PEER_PORT", "FLAGS"})
"""The registers that name the peer."""
Destination = tuple[str, int]
"""Where a datagram goes: (IPv4 address, UDP port); port 0: natively on IP protocol 30."""


@dataclass
class TransmitSlot:
    buffer: int = 0
    length: int = 0
    last: bool = False
    packets: int = 0


@dataclass
class ReceiveSlot:
    buffer: int | None = None
    """The buffer posted to it (None: free)."""
    received: int = 0
    count: int = 0
    ldata: bool = False
    complete: bool = False
    first_at: int = 0
    last_at: int = 0
    mean_gap: int = 0
    """Cycles, as the slot status registers read."""


class EngineModel:
    """One board's engine. ``now`` arguments are host seconds; CYCLES counts them at the
    geometry's clock."""

    def __init__(self, geometry: SlotGeometry, board: int = 0, ip_address: str = "127.0.0.1") -> None:
        """``ip_address``: where hosts reach the model (a built board has IP_ADDRESS)."""
        self.geometry = geometry
        self.values = {ADDRESS[r.name]: 0 for r in ENGINE_REGISTERS if r.access == "rw"}
        mac = int(MAC_ADDRESS.replace(":", ""), 16)
        self.fixed = {"BOARD": board, "IP_ADDRESS": int(ipaddress.IPv4Address(ip_address)),
                      "MAC_HIGH": mac >> 32, "MAC_LOW": mac & 0xFFFF_FFFF, "LINK_UP": 1}
        self.tx_memory = bytearray(geometry.tx_slots * geometry.slot_bytes)
        self.rx_memory = bytearray(geometry.rx_slots * geometry.slot_bytes)
        self.tx = [TransmitSlot() for _ in range(geometry.tx_slots)]
        self.rx = [ReceiveSlot() for _ in range(geometry.rx_slots)]
        self.events: deque[int] = deque()
        self.backlog: deque[int] = deque()
        """Events waiting for room in the FIFO: the gateware holds its missing-list scanner
        and its SENT, FILLED, TAKEN and DRAINED flags until there is room; only RECEIVED events,
        which the packet path cannot wait for, are lost when it is full."""
        self.control_in: deque[ControlPacket] = deque()
        self.counts: Counter[str] = Counter()
        self.drops: Counter[Drop] = Counter()
        self.queue: deque[tuple[int, int, bool]] = deque()
        """Packets to send: (transmit slot, packet, whether it is the slot's last new one)."""
        self.resends: deque[tuple[int, int, bool]] = deque()
        """Packets asked for again, sent ahead of :attr:`queue` as the segmenter does."""
        self.next_at = 0.0
        self.burst_start, self.burst_sent = 0.0, 0
        self.slots: receive_buffers.Slots | None = None
        self.slots_key: tuple = ()
        self.slot_counts = Counter()
        """The reassembly core's drops (by its reasons) and duplicates since the counters
        were cleared, but for those of the core now in use, from ``slot_base`` on."""
        self.slot_base = Counter()
        self.rx_high_ack = 0
        self.send_words: list[int] = []
        self.popped = ControlPacket(0, 0, b"")
        self.popped_at = 0
        self.control_out: list[tuple[bytes, Destination]] = []
        self.peer: Destination | None = None
        """The peer, once worked out (:meth:`_destination`)."""
        self.takes: dict[int, tuple[int, int]] = {}
        """TAKEs waiting for the source to offer words: slot -> (bytes, flag)."""
        self.held: dict[int, list[tuple[int, int, bool]]] = {}
        """The packets of a slot whose TAKE waits."""
        self.writes: list[Callable[[], None]] = []
        """FILL's and TAKE's slot writes, done after their request's reply has left: the
        gateware replies at once and fills the slot while the segmenter waits for it, so a
        4 MiB fill here must not hold the reply back (its host would take it for lost)."""
        self.stamp_start = self.stamp_next = 0
        """The cycles of the stamp source's restart (its word 0), and of its next offer not
        yet taken or refused."""

    # -- registers ------------------------------------------------------------------------------

    def read(self, address: int, now: float) -> int:
        name = _NAMES.get(address)
        reader = getattr(self, f"_read_{name.lower()}", None) if name else None
        if reader is not None:
            return reader(now) & 0xFFFF_FFFF
        if address in self.values:
            return self.values[address]
        return self._status(name, now) if name else 0

    def write(self, address: int, value: int, now: float) -> None:
        name = _NAMES.get(address)
        writer = getattr(self, f"_write_{name.lower()}", None) if name else None
        if writer is not None:
            writer(value, now)
        elif address in self.values:
            self.values[address] = value & ((1 << _WIDTHS[address]) - 1)
        if name in PEER_REGISTERS:
            self.peer = None

    def value(self, name: str) -> int:
        return self.values[ADDRESS[name]]

    def cycles(self, now: float) -> int:
        return int(now * self.geometry.clock_hz) & 0xFFFF_FFFF

    def _status(self, name: str, now: float) -> int:
        """The read-only registers."""
        g = self.geometry
        slot = self.rx[self.value("STATUS_SLOT")] if self.value("STATUS_SLOT") < g.rx_slots else ReceiveSlot()
        if name in DROP_COUNTERS:
            return self._drop_counts()[DROP_COUNTERS[name]]
        values = {
            "CYCLES": self.cycles(now), "CLOCK_HZ": g.clock_hz, "SLOT_BYTES": g.slot_bytes,
            "GEOMETRY": GEOMETRY_WORD.pack(data_width=g.data_width, tx_slots=g.tx_slots, rx_slots=g.rx_slots,
                                           log2_max_packets=max(0, g.max_packets.bit_length() - 1),
                                           fill=int(g.fill), check=int(g.check and g.sink), take=int(g.take),
                                           sink=int(g.sink)),
            "STATE": ENGINE_STATE.pack(tx_idle=int(not (self.queue or self.resends)), slots_ready=1),
            "EVENT_LEVEL": len(self.events), "UPLOAD_ROOM": 16, "DOWNLOAD_LEVEL": 4, "RX_HIGH_ACK": self.rx_high_ack,
            "SLOT_BUFFER": slot.buffer or 0, "SLOT_RECEIVED": slot.received, "SLOT_COUNT": slot.count,
            "SLOT_STATE": (slot.buffer is not None) | slot.ldata << 1 | slot.complete << 2,
            "SLOT_FIRST_AT": slot.first_at, "SLOT_LAST_AT": slot.last_at, "SLOT_MEAN_GAP": slot.mean_gap,
            "CONTROL_FROM": self.popped.address, "CONTROL_PORT": self.popped.port,
        }
        return values.get(name, self.counts.get(name, self.fixed.get(name, 0)))

    def _read_event(self, now: float) -> int:
        taken = self.take_events(1)
        return taken[0] if taken else 0

    def take_events(self, most: int) -> list[int]:
        """Up to ``most`` events out of the FIFO, which the backlog then fills again."""
        taken = [self.events.popleft() for _ in range(min(most, len(self.events)))]
        while self.backlog and len(self.events) < EVENT_DEPTH:
            self.events.append(self.backlog.popleft())
        return taken

    def _read_control_length(self, now: float) -> int:
        self.popped = self.control_in.popleft() if self.control_in else ControlPacket(0, 0, b"")
        self.popped_at = 0
        return len(self.popped.packet)

    def _read_control_data(self, now: float) -> int:
        word = self.popped.packet[self.popped_at:self.popped_at + 4]
        self.popped_at += 4
        return int.from_bytes(word.ljust(4, b"\0"), "little")

    def _read_download_data(self, now: float) -> int:
        at = 4 * self._step("DOWNLOAD_ADDRESS")
        return int.from_bytes(self.rx_memory[at:at + 4].ljust(4, b"\0"), "little")

    def _write_upload_data(self, value: int, now: float) -> None:
        self.upload(self._step("UPLOAD_ADDRESS"), value.to_bytes(4, "little"))

    def _step(self, name: str) -> int:
        """An address register's value, which its data register's access moves on."""
        address = self.values[ADDRESS[name]]
        self.values[ADDRESS[name]] = (address + 1) & 0xFFFF_FFFF
        return address

    def _write_send_data(self, value: int, now: float) -> None:
        self.send_words.append(value)

    def _write_send_length(self, value: int, now: float) -> None:
        packet = b"".join(w.to_bytes(4, "little") for w in self.send_words)[:value]
        self.send_words = []
        self.control_out.append((packet, self._destination()))
        self.counts["TX_CONTROL"] += 1

    def _write_stamp_every(self, value: int, now: float) -> None:
        """The built-in stamp source (the board top feeds the source port from it) restarts:
        it offers 0, 1, 2 ... one every ``value`` cycles from now, or none."""
        self.values[ADDRESS["STAMP_EVERY"]] = value & 0xFFFF
        self.stamp_start = self.stamp_next = int(now * self.geometry.clock_hz)
        self._run_takes(now)

    def _next_offer(self, now: float) -> int:
        """The cycle of the stamp source's first offer at or after ``now`` not yet counted."""
        every, cycle = self.value("STAMP_EVERY"), int(now * self.geometry.clock_hz)
        return self.stamp_next + max(0, -(-(cycle - self.stamp_next) // every)) * every if every else cycle

    def _read_source_refused(self, now: float) -> int:
        """Counted at each take, and the offers since the last one, until now."""
        every = self.value("STAMP_EVERY")
        since = (self._next_offer(now + 1 / self.geometry.clock_hz) - self.stamp_next) // every if every else 0
        return self.counts["SOURCE_REFUSED"] + since

    def _write_counters_clear(self, value: int, now: float) -> None:
        self.stamp_next = self._next_offer(now)
        self.counts.clear()
        self.drops.clear()
        self.slot_counts, self.slot_base = Counter(), self._slot_totals()

    def _write_command(self, value: int, now: float) -> None:
        command = COMMAND_WORD.unpack(value)
        run = getattr(self, f"_{Command(command['op']).name.lower()}", None) \
            if command["op"] in Command.__members__.values() else None
        if run is None or not run(command["slot"], command["flag"], now):
            self.counts["COMMANDS_REJECTED"] += 1

    # -- slot memory, for the host link's UPLOAD and DOWNLOAD ---------------------------------------

    def upload(self, word_address: int, data: bytes | memoryview) -> bool:
        at = 4 * word_address
        if at + len(data) > len(self.tx_memory):
            return False
        self._write_slots()
        self.tx_memory[at:at + len(data)] = data
        return True

    def download(self, word_address: int, words: int) -> bytes | None:
        at = 4 * word_address
        return bytes(self.rx_memory[at:at + 4 * words]) if at + 4 * words <= len(self.rx_memory) else None

    # -- commands (each returns whether it was taken) -------------------------------------------

    def _send(self, index: int, last: int, now: float) -> bool:
        g, length = self.geometry, self.value("ARG1")
        size = self.value("PACKET_SIZE")
        if index >= g.tx_slots or not size or length > g.slot_bytes or -(-length // size) > g.max_packets:
            return False
        packets = max(1, -(-length // size))
        self.tx[index] = TransmitSlot(self.value("ARG0"), length, bool(last), packets)
        sends = [(index, p, p == packets - 1) for p in range(packets)]
        if index in self.takes:
            self.held[index] = sends  # behind its TAKE, as the segmenter's fetches
        else:
            self.queue.extend(sends)
        return True

    def _resend(self, index: int, flag: int, now: float) -> bool:
        packet = self.value("ARG0")
        if index >= self.geometry.tx_slots or packet >= self.tx[index].packets:
            return False
        self.resends.append((index, packet, False))
        return True

    def _take(self, index: int, flag: int, now: float) -> bool:
        """The source port takes ARG1 bytes from the stamp source into the slot: the words
        it offers from now on, one a STAMP_EVERY cycles, numbered from its restart; those
        it offered since the last take are refused. Done at once, as every command here
        (the gateware takes a word an offer); with STAMP_EVERY 0 the take, and the slot's
        SEND, wait for the source to start."""
        g, length = self.geometry, self.value("ARG1")
        if not g.take or index >= g.tx_slots or length > g.slot_bytes:
            return False
        self.takes[index] = (length, flag)
        self._run_takes(now)
        return True

    def _run_takes(self, now: float) -> None:
        every, beat = self.value("STAMP_EVERY"), self.geometry.data_width // 8
        while self.takes and every:
            index = next(iter(self.takes))  # in the order given
            length, flag = self.takes.pop(index)
            words = -(-length // beat)
            first = self._next_offer(now)
            self.counts["SOURCE_REFUSED"] += (first - self.stamp_next) // every
            self.counts["SOURCE_TAKEN"] += words
            self.stamp_next = first + words * every
            at, number = index * self.geometry.slot_bytes, (first - self.stamp_start) // every
            self.writes.append(partial(self._write_stamps, at, number, length))
            self.queue.extend(self.held.pop(index, ()))
            if not flag:
                self._event(Event.TAKEN, index, 0)

    def _post(self, index: int, flag: int, now: float) -> bool:
        if index >= self.geometry.rx_slots or not self.value("PACKET_SIZE"):
            return False
        slots = self._reassembly()
        if self.rx[index].buffer is not None:
            slots.drop(self.rx[index].buffer)
        self.rx[index] = ReceiveSlot(self.value("ARG0"))
        slots.post(self.value("ARG0"), self.geometry.max_packets)
        return True

    def _release(self, index: int, flag: int, now: float) -> bool:
        if index >= self.geometry.rx_slots:
            return False
        if self.rx[index].buffer is not None and self.slots is not None:
            self.slots.drop(self.rx[index].buffer)
        self.rx[index] = ReceiveSlot()
        return True

    def _query_missing(self, index: int, flag: int, now: float) -> bool:
        if index >= self.geometry.rx_slots:
            return False
        slot = self.rx[index]
        limit = slot.count if slot.ldata else self.value("ARG0")
        missing = [p for p in self.slots.missing(slot.buffer) if p < limit] \
            if slot.buffer is not None and self.slots is not None else []
        for packet in missing:
            self._event(Event.MISSING, index, packet)
        self._event(Event.MISSING_END, index, len(missing))
        return True

    def _fill(self, index: int, flag: int, now: float) -> bool:
        length = self.value("ARG1")
        if not self.geometry.fill or index >= self.geometry.tx_slots or length > self.geometry.slot_bytes:
            return False
        at, key = index * self.geometry.slot_bytes, self.value("ARG0")
        self.writes.append(lambda: fill_pattern(memoryview(self.tx_memory)[at:at + length], key))
        if not flag:
            self._event(Event.FILLED, index, 0)
        return True

    def _drain(self, index: int, flag: int, now: float) -> bool:
        """The slot's bytes to the sink port, which here takes them at once and drops them;
        the pattern checker, where the geometry has one, counts the beats that are not
        buffer ARG0's pattern."""
        length = self.value("ARG1")
        if not self.geometry.sink or index >= self.geometry.rx_slots or length > self.geometry.slot_bytes:
            return False
        wrong = 0
        if self.geometry.check:
            at, beat = index * self.geometry.slot_bytes, self.geometry.data_width // 8
            got, expected = self.rx_memory[at:at + length], pattern(self.value("ARG0"), length)
            wrong = 0 if got == expected else sum(got[b:b + beat] != expected[b:b + beat]
                                                  for b in range(0, length, beat))
        self.counts["CHECK_MISMATCHES"] = wrong
        self._event(Event.DRAINED, index, min(wrong, 0xFFFF))
        return True

    def _event(self, kind: Event, slot: int, value: int, flags: int = 0) -> None:
        word = EVENT_WORD.pack(valid=1, kind=kind, slot=slot, value=value & 0xFFFF, flags=flags)
        if len(self.events) < EVENT_DEPTH and not self.backlog:
            self.events.append(word)
        elif kind != Event.RECEIVED:
            self.backlog.append(word)
        else:
            self.counts["EVENTS_LOST"] += 1

    # -- the transmit side ---------------------------------------------------------------------------

    def outgoing(self, now: float) -> list[tuple[bytes, Destination, float]]:
        """The datagrams due by ``now``, each with when it starts on the wire: control
        packets at once, DATA as pacing and the wire allow (a packet the loop comes to
        late starts when it comes, at most :data:`LATE_AT_MOST` behind its pace)."""
        self._write_slots()
        out = [(packet, to, now) for packet, to in self.control_out]
        self.control_out = []
        size = self.value("PACKET_SIZE")
        buffer = bytearray(HEADER_SIZE + size + 3)
        while (self.resends or self.queue) and self.next_at <= now and len(out) < 256:
            index, packet, last_new = (self.resends or self.queue).popleft()
            datagram = self._data(index, packet, size, buffer)
            starts = max(self.next_at, now - LATE_AT_MOST)
            out.append((datagram, self._destination(), starts))
            self.counts["TX_PACKETS"] += 1
            self._paced(starts, len(datagram))
            if last_new:
                self._event(Event.SENT, index, 0)
        return out

    def _write_stamps(self, at: int, first: int, length: int) -> None:
        """Stamps ``first``, ``first + 1`` ... one a beat, over ``length`` bytes of slot memory."""
        beat = self.geometry.data_width // 8
        self.tx_memory[at:at + length] = stamps(first, 1, -(-length // beat) * beat, beat)[:length]

    def _write_slots(self) -> None:
        writes, self.writes = self.writes, []
        for write in writes:
            write()

    def next_due(self) -> float | None:
        return self.next_at if self.resends or self.queue else None

    def _data(self, index: int, packet: int, size: int, buffer: bytearray) -> bytes:
        slot, flags = self.tx[index], CONNECTION_FLAGS.unpack(self.value("FLAGS"))
        at = index * self.geometry.slot_bytes
        data = memoryview(self.tx_memory)[at:at + slot.length]
        written, _ = pack(buffer, data, size, packet, 1, slot.buffer, self.value("HIGH_ACK"), slot.last,
                          self.value("LOCAL_PORT"), self.value("PEER_PORT"), bool(flags["data_checksum"]))
        return bytes(buffer[:written])

    def _paced(self, sent_at: float, length: int) -> None:
        """When the next packet may start: the wire's time for this one, and the pacer's."""
        wire = sent_at + (length + FRAME_OVERHEAD) * 8 / WIRE_BPS
        mode, size = self.value("PACING_MODE"), max(1, self.value("BURST_SIZE"))
        interval = self.value("BURST_INTERVAL") / self.geometry.clock_hz
        if mode == PacingMode.BURSTS:
            if sent_at >= self.burst_start + interval:
                self.burst_start, self.burst_sent = sent_at, 0
            self.burst_sent += 1
            self.next_at = max(wire, self.burst_start + interval) if self.burst_sent >= size else wire
        elif mode == PacingMode.SMOOTH:
            self.next_at = max(wire, sent_at + interval / size)
        else:
            self.next_at = wire

    def _destination(self) -> Destination:
        """The peer, as PEER_ADDRESS, UDP_PEER_PORT and FLAGS name it: where DATA and control
        packets go, and the only source whose DATA is placed. Worked out once a connection,
        not once a packet."""
        if self.peer is None:
            udp = CONNECTION_FLAGS.unpack(self.value("FLAGS"))["udp"]
            self.peer = str(ipaddress.IPv4Address(self.value("PEER_ADDRESS"))), self.value("UDP_PEER_PORT") if udp else 0
        return self.peer

    # -- the receive side ---------------------------------------------------------------------------------

    def arrive(self, datagram: bytes, source: Destination, now: float) -> None:
        """A NETBLT datagram for the board's port from ``source`` (port 0: natively on IP)."""
        if len(datagram) < L.HEADER.end:
            self.drops[Drop.SHORT] += 1
        elif datagram[L.HEADER.field("type").offset] in (L.PacketType.DATA, L.PacketType.LDATA):
            self._place(datagram, source, now)
        elif datagram[L.HEADER.field("type").offset] <= max(L.PacketType):
            self._control(datagram, source)
        else:
            self.drops[Drop.TYPE] += 1

    def _control(self, datagram: bytes, source: Destination) -> None:
        if datagram[L.HEADER.field("version").offset] != L.VERSION:
            self.drops[Drop.VERSION] += 1
        elif internet_checksum(datagram) != 0:
            self.drops[Drop.CHECKSUM] += 1
        elif len(self.control_in) >= CONTROL_DEPTH:
            self.drops[Drop.CONTROL_OVERFLOW] += 1
        else:
            self.control_in.append(ControlPacket(int(ipaddress.IPv4Address(source[0])), source[1], datagram))
            self.counts["RX_CONTROL"] += 1

    def _place(self, datagram: bytes, source: Destination, now: float) -> None:
        if len(datagram) < HEADER_SIZE:
            self.drops[Drop.SHORT] += 1
            return
        if source != self._destination():
            self.drops[Drop.CONNECTION] += 1
            return
        buffer = _field(datagram, "buffer")
        index = next((i for i, slot in enumerate(self.rx) if slot.buffer == buffer), None)
        if index is None or self.slots is None:
            self.drops[Drop.UNPOSTED] += 1
            return
        accepted = self.slots.accepted
        events, _ = self.slots.accept(datagram, len(datagram), now)
        if self.slots.accepted != accepted:
            self._accepted(index, datagram, events, now)

    def _accepted(self, index: int, datagram: bytes, events: list, now: float) -> None:
        slot, cycles = self.rx[index], self.cycles(now)
        if slot.received:
            gap = (cycles - slot.last_at) & 0xFFFF_FFFF
            slot.mean_gap = gap if slot.received == 1 else slot.mean_gap + (gap - slot.mean_gap) // 8
        else:
            slot.first_at = cycles
        slot.received += 1
        slot.last_at = cycles
        self.counts["RX_ACCEPTED"] += 1
        self.rx_high_ack = _field(datagram, "high_ack")  # the newest DATA's, as the gateware keeps it
        kinds = {type(e).__name__: e for e in events}
        if "LdataSeen" in kinds:
            slot.ldata, slot.count = True, kinds["LdataSeen"].count
        if "BufferComplete" in kinds:
            slot.complete = True
            at = index * self.geometry.slot_bytes
            data = self.slots.take(slot.buffer)
            self.rx_memory[at:at + len(data)] = data
        if kinds:
            last = _field(datagram, "flags") & L.FLAG_LAST_BUFFER
            flags = RECEIVED_FLAGS.pack(first=int(slot.received == 1), ldata=int("LdataSeen" in kinds),
                                        complete=int(slot.complete), last_buffer=int(bool(last)))
            self._event(Event.RECEIVED, index, slot.count if slot.ldata else 0, flags)

    def _reassembly(self) -> receive_buffers.Slots:
        """The reassembly core for the connection's settings, new when they changed."""
        flags = CONNECTION_FLAGS.unpack(self.value("FLAGS"))
        key = (self.value("PACKET_SIZE"), self.value("LOCAL_PORT"), self.value("PEER_PORT"), flags["data_checksum"])
        if key != self.slots_key:
            self.slot_counts += self._slot_totals() - self.slot_base
            self.slot_base = Counter()
            self.slots, self.slots_key = receive_buffers.Slots(key[0], self.geometry.slot_bytes, *key[1:3],
                                                               bool(key[3])), key
            for slot in self.rx:
                if slot.buffer is not None:
                    self.slots.post(slot.buffer, self.geometry.max_packets)
        return self.slots

    def _slot_totals(self) -> Counter[str]:
        """What the reassembly core in use has counted: drops by reason, and duplicates."""
        if self.slots is None:
            return Counter()
        return Counter(self.slots.dropped) + Counter(duplicates=self.slots.duplicates)

    def _slot_counts(self) -> Counter[str]:
        return self.slot_counts + (self._slot_totals() - self.slot_base)

    def _drop_counts(self) -> Counter[Drop]:
        counts = self.drops.copy()
        for reason, count in self._slot_counts().items():
            if reason != "duplicates":
                counts[SLOTS_DROPS[reason]] += count
        return counts

    def _read_rx_duplicates(self, now: float) -> int:
        return self._slot_counts()["duplicates"]


def _field(datagram: bytes, name: str) -> int:
    field = L.DATA.field(name)
    return int.from_bytes(datagram[field.offset:field.end], "big")


_NAMES = {ADDRESS[r.name]: r.name for r in ENGINE_REGISTERS}
_WIDTHS = {ADDRESS[r.name]: r.width for r in ENGINE_REGISTERS}
