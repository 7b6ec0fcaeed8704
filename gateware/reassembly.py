"""Receive reassembly: payloads into their slots, one bitmap bit per packet, completion.

Every posted slot has a row: the buffer it waits for, packets received, the count its
LDATA fixed, the highest packet seen, and first/last arrival times with a running
average gap (for the host's data timers, RFC 998 section 5.2.2). The rows are a small
memory (LUT RAM on the ECP5), one read port for each reader: with 16 slots, rows in
registers and their 16-way multiplexers were the most crowded part of the Versa's
DRAM build. Only each slot's ``active`` flag and buffer number are registers, as every
packet is matched against all of them at once. A packet is placed at
packet number x packet size inside its slot; every bound is checked before the first
byte is written, and the write address is clamped to the slot besides, so no packet
can write outside its slot whatever it claims. A packet the checks let through is
written to the receive store (receive_store.py) between ``open`` and ``close``; it
counts (its bit is set) only after its last beat passed every check, and ``close``
tells the store whether to keep it.
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Assume, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats.drops import Drop
from .config import EngineConfig
from .streams import DATA_HEADER, rx_data

RX_COMMAND = data.StructLayout({"post": 1, "slot": 4, "buffer": 32})
"""post=1: slot now waits for ``buffer`` (its bitmap cleared); post=0: release the slot."""

MISSING_QUERY = data.StructLayout({"slot": 4, "limit": 16})
"""List the packets of ``slot`` not yet received, below its LDATA count if known, else
below ``limit`` (the packets the host expects in a full buffer)."""

MISSING = data.StructLayout({"slot": 4, "end": 1, "packet": 16})
"""One missing packet; then an ``end`` entry whose ``packet`` is the number listed."""

RX_EVENT = data.StructLayout({"slot": 4, "first": 1, "ldata": 1, "complete": 1,
                              "last_buffer": 1, "count": 16})
"""What one accepted packet changed; ``count`` is the buffer's packet count once known."""

SLOT_STATUS = data.StructLayout({
    "buffer": 32, "active": 1, "complete": 1, "count_known": 1, "received": 16, "count": 16,
    "first_at": 32, "last_at": 32, "mean_gap": 32,
})

SLOT_ROW = data.StructLayout({
    "buffer": 32, "complete": 1, "known": 1, "received": 16, "count": 16, "highest": 16,
    "first_at": 32, "last_at": 32, "mean_gap": 32,
})
"""A slot's row: what its packets have told so far (``known``: its count is LDATA's)."""

GAP_WEIGHT = 3
"""The running gap moves 1/8 of the way to each new gap, as TCP's SRTT does."""


class Reassembly(wiring.Component):
    def __init__(self, config: EngineConfig, packet_bytes: int | None = None, formal: bool = False) -> None:
        """``packet_bytes``: the longest packet the store takes (a longer one is a LENGTH
        drop); by default a slot's. ``formal``: with the properties (:meth:`properties`),
        for SymbiYosys (sim/rtl/formal.py)."""
        self.config, self.formal = config, formal
        self.packet_bytes = packet_bytes or config.slot_bytes
        super().__init__({
            "packet_size": In(16),  # data bytes per packet, whole beats (control.py rounds it)
            "input": In(stream.Signature(rx_data(config.data_width))),
            "command": In(stream.Signature(RX_COMMAND)),
            "query": In(stream.Signature(MISSING_QUERY)),
            "missing": Out(stream.Signature(MISSING)),
            "event": Out(stream.Signature(RX_EVENT)),
            # The receive store's packet side (receive_store.store_signature), flipped.
            "open": Out(stream.Signature(config.rx_address_width)),
            "write": In(memory.WritePort.Signature(addr_width=config.rx_address_width, shape=config.data_width,
                                                    granularity=8)),
            "close": Out(stream.Signature(1)),
            "status_slot": In(4),
            "status": Out(SLOT_STATUS),
            "high_ack": Out(16),
            "drops": Out(len(Drop)),
            "accepted": Out(1),
            "duplicate": Out(1),
            "events_lost": Out(1),
        })

    def elaborate(self, platform) -> Module:
        self.m = m = Module()
        self._memories()
        self._status()
        self._packet_in_hand()
        with m.FSM() as self.fsm:
            with m.State("IDLE"):
                self._idle()
            with m.State("CLEAR"):
                self._clear()
            with m.State("LOOKUP"):
                self._lookup()
            with m.State("CHECK"):
                self._check()
            with m.State("OPEN"):
                # The store takes the packet's first address when it has room for it.
                m.d.comb += [self.open.valid.eq(1), self.open.payload.eq(self.address)]
                with m.If(self.open.ready):
                    m.next = "STREAM"
            with m.State("STREAM"):
                self._stream()
            with m.State("COMMIT"):
                self._commit()
        self._scanner(m, self.scan_read, self.rows.read_port(domain="comb"), self.active)
        if self.formal:
            self.properties()
        return m

    def properties(self) -> None:
        """What the receive path promises whatever comes: a write lands only in a slot
        posted for the packet's buffer, and a packet counts (its bit is set) only once
        every byte it carried was written, from its own place in that slot on. Assumed:
        the parser's promises (a beat offered stays until taken, a packet's header holds
        over its beats and the cycle after its last, which is when it counts, and a
        packet not marked bad has the beats its length needs);
        commands, queries and the store are free."""
        m, cfg, beat, hdr = self.m, self.config, self.input.payload, self.input.payload.header
        taken = self.input.valid & self.input.ready
        offered, before, header = Signal(), Signal(len(beat.as_value())), Signal(DATA_HEADER)
        beats = Signal(16)
        """Beats of the packet in hand taken before this cycle."""
        m.d.sync += [offered.eq(self.input.valid & ~self.input.ready), before.eq(beat.as_value())]
        with m.If(taken):
            m.d.sync += [beats.eq(Mux(beat.last, 0, beats + 1)), header.eq(hdr.as_value())]
        most = (1 << 16) // cfg.beat_bytes  # an IP datagram's beats, at most
        ended = Signal()
        m.d.sync += ended.eq(taken & beat.last)
        m.d.comb += [Assume(~offered | (self.input.valid & (beat.as_value() == before))),
                     Assume(~ended | (~self.input.valid & (beat.as_value() == before))),
                     Assume(~(self.input.valid & (beats != 0)) | (hdr.as_value() == header.as_value())),
                     Assume(~self.input.valid | (beats < most))]
        with m.If(self.input.valid & beat.last & ~beat.bad):
            m.d.comb += Assume(beats + 1 == (hdr.length + cfg.beat_bytes - 1) // cfg.beat_bytes)

        owner = self.write.addr >> (cfg.slot_words.bit_length() - 1)
        with m.If(self.write.en.any()):
            m.d.comb += Assert(self.active[owner] & (self.buffer[owner] == hdr.buffer),
                               "a write lands only in a slot posted for its packet's buffer")
        cut, placed = Signal(), Signal()
        """A byte of the packet in hand was not written; its first beat went where it belongs."""
        place = self.slot * cfg.slot_words + (self.start >> (cfg.beat_bytes.bit_length() - 1))
        with m.If(taken & self.write_ok):
            m.d.sync += cut.eq(Mux(beats == 0, 0, cut) | (beat.keep.any() & ~self.write.en.any()))
            with m.If(beats == 0):
                m.d.sync += placed.eq(self.write.addr == place[:len(self.write.addr)])
        with m.If(self.accepted):
            bits = self.bits_write
            m.d.comb += [Assert(~cut & placed, "a packet counts only once it is written whole in its place"),
                         Assert(bits.en & (bits.addr == self.slot * cfg.bitmap_words + (header.packet >> 5))
                                & bits.data.bit_select(header.packet[:5], 1), "the bit set is the packet's own")]
        self.invariants(beats, most, header, cut, placed, place)

    def invariants(self, beats: Value, most: int, header: Value, cut: Value, placed: Value, place: Value) -> None:
        """What makes the proof close by induction: the packet in hand as the states
        before it saw it (its slot, where it starts, its checks), and the beats taken;
        its header is the beat offered until one is taken, then the one kept."""
        m, cfg, fsm = self.m, self.config, self.fsm
        judging = fsm.ongoing("LOOKUP") | fsm.ongoing("CHECK") | fsm.ongoing("OPEN")
        first = judging | (fsm.ongoing("STREAM") & (beats == 0))
        hdr = data.View(DATA_HEADER, Mux(beats == 0, self.input.payload.header.as_value(), header.as_value()))
        m.d.comb += Assert(beats <= most, "a packet's beats are an IP datagram's at most")
        with m.If(first):
            m.d.comb += Assert(self.input.valid & (beats == 0), "a packet's first beat waits until it is taken")
        with m.If(judging | fsm.ongoing("STREAM")):
            m.d.comb += Assert(~self.found | (self.active[self.slot] & (self.buffer[self.slot] == hdr.buffer)),
                               "the packet's slot is posted for it")
        with m.If(fsm.ongoing("CHECK") | fsm.ongoing("OPEN") | fsm.ongoing("STREAM")):
            m.d.comb += Assert(self.bit == 1 << hdr.packet[:5], "the packet's bit is its own")
        with m.If(fsm.ongoing("COMMIT")):
            m.d.comb += Assert(self.write_ok & (self.input.payload.header.as_value() == header.as_value())
                               & (self.bit == 1 << header.packet[:5]) & (header.packet < cfg.max_packets),
                               "the packet that counts is the one whose last beat went")
        with m.If(~judging & ~fsm.ongoing("STREAM")):
            m.d.comb += Assert(beats == 0, "between packets no beat is taken")
        with m.If((fsm.ongoing("OPEN") | fsm.ongoing("STREAM")) & self.write_ok):
            m.d.comb += [Assert(self.found & (self.limit == self.slot * cfg.slot_words + cfg.slot_words),
                                "the packet's slot ends where it ends"),
                         Assert(self.address == place + beats, "the next beat goes after the last"),
                         Assert((self.start + hdr.length <= cfg.slot_bytes) & (hdr.packet < cfg.max_packets),
                                "the packet fits its slot"),
                         Assert((beats == 0) | placed, "its first beat went to its place"),
                         Assert((beats == 0) | ~cut
                                | ((self.start >> (cfg.beat_bytes.bit_length() - 1)) + beats > cfg.slot_words),
                                "a beat is cut only past the slot's end")]

    def _memories(self) -> None:
        """The bitmaps and the rows, written by the packet path only; read by it, by the
        status port and by the scanner. The slots' flags and buffers, and the clock."""
        m, S, BW = self.m, self.config.rx_slots, self.config.bitmap_words
        m.submodules.bitmaps = bitmaps = memory.Memory(shape=32, depth=S * BW, init=[])
        self.bits_write = bitmaps.write_port()
        self.bits_read = bitmaps.read_port()
        self.scan_read = bitmaps.read_port()
        m.submodules.rows = self.rows = rows = memory.Memory(shape=SLOT_ROW, depth=S, init=[])
        self.row_write = rows.write_port()
        self.row = rows.read_port(domain="comb")
        self.shown = rows.read_port(domain="comb")
        self.active = Array(Signal(name=f"active{i}") for i in range(S))
        self.buffer = Array(Signal(32, name=f"buffer{i}") for i in range(S))
        now = Signal(32)
        m.d.sync += now.eq(now + 1)
        self.now = now

    def _status(self) -> None:
        """The row of the slot STATUS_SLOT names, for the host."""
        m, shown = self.m, self.shown
        m.d.comb += shown.addr.eq(self.status_slot)
        m.d.comb += [self.status.active.eq(self.active[self.status_slot]),
                     self.status.count_known.eq(shown.data.known)]
        for name in ("buffer", "complete", "received", "count", "first_at", "last_at", "mean_gap"):
            m.d.comb += self.status[name].eq(shown.data[name])

    def _packet_in_hand(self) -> None:
        """The packet in hand: its slot (matched against every posted buffer at once),
        where it goes, and what the checks made of it."""
        m, S, BW = self.m, self.config.rx_slots, self.config.bitmap_words
        hdr = self.input.payload.header
        slot = Signal(range(S))
        found = Signal()
        start = Signal(32)
        address, limit = Signal(32), Signal(32)
        write_ok = Signal()
        reject = Signal(4)
        rejected = Signal()
        bitmap_word = Signal(32)
        bit = Signal(32)
        clear = Signal(range(BW + 1))
        self.slot, self.found, self.start, self.address, self.limit = slot, found, start, address, limit
        self.write_ok, self.reject, self.rejected = write_ok, reject, rejected
        self.bitmap_word, self.bit, self.clearing = bitmap_word, bit, clear
        m.d.comb += self.row.addr.eq(slot)
        self.match = [self.active[i] & (self.buffer[i] == hdr.buffer) for i in range(S)]
        match_slot = Const(0, range(S))
        for i in reversed(range(S)):
            match_slot = Mux(self.match[i], i, match_slot)
        self.match_slot = match_slot

    def _idle(self) -> None:
        """A command first: POST clears the slot's bitmap, RELEASE frees it; else a packet."""
        m, command, hdr = self.m, self.command.payload, self.input.payload.header
        with m.If(self.command.valid):
            m.d.comb += self.command.ready.eq(1)
            with m.If(command.slot < self.config.rx_slots):
                m.d.sync += [self.active[command.slot].eq(0), self.slot.eq(command.slot)]
                with m.If(command.post):
                    m.d.sync += [self.buffer[command.slot].eq(command.buffer), self.clearing.eq(0)]
                    m.next = "CLEAR"
        with m.Elif(self.input.valid):
            m.d.sync += [self.slot.eq(self.match_slot), self.found.eq(Cat(*self.match).any()),
                         self.start.eq(hdr.packet * self.packet_size)]
            m.next = "LOOKUP"

    def _clear(self) -> None:
        """A bitmap word a cycle; then the row starts afresh and the slot is posted."""
        m, slot, clear, BW = self.m, self.slot, self.clearing, self.config.bitmap_words
        m.d.comb += [self.bits_write.addr.eq(slot * BW + clear), self.bits_write.data.eq(0),
                     self.bits_write.en.eq(1)]
        m.d.sync += clear.eq(clear + 1)
        with m.If(clear == BW - 1):
            m.d.comb += [self.row_write.addr.eq(slot), self.row_write.data.eq(0),
                         self.row_write.data.buffer.eq(self.buffer[slot]), self.row_write.en.eq(1)]
            m.d.sync += self.active[slot].eq(1)
            m.next = "IDLE"

    def _lookup(self) -> None:
        """The packet's bitmap word, its bit, and its place in the store."""
        m, cfg, hdr, slot = self.m, self.config, self.input.payload.header, self.slot
        m.d.comb += self.bits_read.addr.eq(slot * cfg.bitmap_words + (hdr.packet >> 5))
        m.d.sync += [self.bit.eq(1 << hdr.packet[:5]),
                     self.address.eq(slot * cfg.slot_words + (self.start >> (cfg.beat_bytes.bit_length() - 1))),
                     self.limit.eq(slot * cfg.slot_words + cfg.slot_words)]
        m.next = "CHECK"

    def _check(self) -> None:
        """Every bound before the first byte is written; a new packet is opened in the
        store, anything else streamed through unwritten."""
        m, cfg, hdr, row = self.m, self.config, self.input.payload.header, self.row
        p = hdr.packet
        packet_size = self.packet_size
        checks = [
            (~self.found, Drop.UNPOSTED),
            ((p >= cfg.max_packets) | (self.start + hdr.length > cfg.slot_bytes), Drop.OUTSIDE),
            (Mux(hdr.ldata, hdr.length > packet_size, hdr.length != packet_size)
             | (hdr.length > self.packet_bytes), Drop.LENGTH),
            (row.data.known & ((p >= row.data.count) | (hdr.ldata & (p + 1 != row.data.count))),
             Drop.PAST_LDATA),
            (hdr.ldata & (row.data.received != 0) & (row.data.highest > p), Drop.PAST_LDATA),
        ]
        m.d.sync += [self.rejected.eq(0), self.write_ok.eq(0), self.bitmap_word.eq(self.bits_read.data)]
        for bad, reason in reversed(checks):
            with m.If(bad):
                m.d.sync += [self.rejected.eq(1), self.reject.eq(reason)]
        new = ~Cat(*(bad for bad, _ in checks)).any() & ((self.bits_read.data & self.bit) == 0)
        m.d.sync += self.write_ok.eq(new)
        m.next = "STREAM"
        with m.If(new):
            m.next = "OPEN"

    def _stream(self) -> None:
        """The packet's beats into the store (clamped to its slot), then its verdict."""
        m, cfg, beat, hdr = self.m, self.config, self.input.payload, self.input.payload.header
        address, write_ok, rejected = self.address, self.write_ok, self.rejected
        m.d.comb += self.input.ready.eq(1)
        with m.If(self.input.valid):
            inside = (address >= self.slot * cfg.slot_words) & (address < self.limit)
            m.d.comb += [self.write.addr.eq(address), self.write.data.eq(beat.data),
                         self.write.en.eq(Mux(write_ok & inside, beat.keep, 0))]
            m.d.sync += address.eq(address + 1)
            with m.If(beat.last):
                m.d.comb += [self.close.valid.eq(write_ok), self.close.payload.eq(~beat.bad)]
                # The newest DATA's high-ack, not the highest: a new connection's numbers
                # start again below the last one's (the host orders them itself).
                with m.If(~beat.bad):
                    m.d.sync += self.high_ack.eq(hdr.high_ack)
                with m.If(~beat.bad & rejected):
                    m.d.comb += self.drops.eq(1 << self.reject)
                with m.If(~beat.bad & ~rejected & ~write_ok):
                    m.d.comb += self.duplicate.eq(1)
                with m.If(~beat.bad & write_ok):
                    m.next = "COMMIT"
                with m.Else():
                    m.next = "IDLE"

    def _commit(self) -> None:
        """The kept packet counts: its bit set, its row moved on, its event raised. Its
        header is still the input's: the parser holds its last beat until the next
        packet's first data beat, which its header beats come before (the proof assumes
        so: Reassembly.properties)."""
        m, hdr, now, slot = self.m, self.input.payload.header, self.now, self.slot
        was, new = self.row.data, Signal(SLOT_ROW)
        first = was.received == 0
        gap = now - was.last_at
        m.d.comb += [
            new.buffer.eq(was.buffer), new.first_at.eq(Mux(first, now, was.first_at)),
            new.received.eq(was.received + 1), new.count.eq(Mux(hdr.ldata, hdr.packet + 1, was.count)),
            new.known.eq(was.known | hdr.ldata), new.complete.eq(new.known & (new.received == new.count)),
            new.last_at.eq(now),
            new.highest.eq(Mux(first | (hdr.packet > was.highest), hdr.packet, was.highest)),
            new.mean_gap.eq(Mux(first, was.mean_gap, Mux(was.received == 1, gap, was.mean_gap + (
                (gap.as_signed() - was.mean_gap.as_signed()) >> GAP_WEIGHT)))),
        ]
        m.d.comb += [self.bits_write.addr.eq(slot * self.config.bitmap_words + (hdr.packet >> 5)),
                     self.bits_write.data.eq(self.bitmap_word | self.bit), self.bits_write.en.eq(1),
                     self.row_write.addr.eq(slot), self.row_write.data.eq(new), self.row_write.en.eq(1),
                     self.accepted.eq(1)]
        event = self.event.payload
        m.d.comb += [event.slot.eq(slot), event.first.eq(first), event.ldata.eq(hdr.ldata),
                     event.complete.eq(new.complete), event.last_buffer.eq(hdr.last_buffer),
                     event.count.eq(new.count)]
        m.d.comb += self.event.valid.eq(first | hdr.ldata | new.complete)
        m.d.comb += self.events_lost.eq(self.event.valid & ~self.event.ready)
        m.next = "IDLE"

    def _scanner(self, m: Module, read, row, active) -> None:
        """Lists a slot's missing packets, a bit a cycle, beside the packet path."""
        cfg = self.config
        BW = cfg.bitmap_words
        query = self.query.payload
        slot = Signal(4)
        end = Signal(17)
        packet = Signal(17)
        listed = Signal(16)
        word = Signal(32)
        out = self.missing.payload
        m.d.comb += row.addr.eq(query.slot)
        with m.FSM(name="scan"):
            with m.State("IDLE"):
                m.d.comb += self.query.ready.eq(1)
                with m.If(self.query.valid):
                    valid_slot = (query.slot < cfg.rx_slots) & active[query.slot]
                    limit = Mux(row.data.known, row.data.count, query.limit)
                    m.d.sync += [slot.eq(query.slot), packet.eq(0), listed.eq(0),
                                 end.eq(Mux(valid_slot, Mux(limit < cfg.max_packets, limit,
                                                             cfg.max_packets), 0))]
                    m.next = "READ"
            with m.State("READ"):
                m.d.comb += read.addr.eq(slot * BW + (packet >> 5))
                m.next = "LATCH"
                with m.If(packet >= end):
                    m.next = "END"
            with m.State("LATCH"):
                m.d.sync += word.eq(read.data)
                m.next = "BITS"
            with m.State("BITS"):
                missing = ~word.bit_select(packet[:5], 1)
                m.d.comb += [out.slot.eq(slot), out.packet.eq(packet),
                             self.missing.valid.eq(missing & (packet < end))]
                with m.If(~self.missing.valid | self.missing.ready):
                    m.d.sync += [packet.eq(packet + 1), listed.eq(listed + self.missing.valid)]
                    with m.If(packet + 1 >= end):
                        m.next = "END"
                    with m.Elif(packet[:5] == 31):
                        m.next = "READ"
            with m.State("END"):
                m.d.comb += [out.slot.eq(slot), out.end.eq(1), out.packet.eq(listed),
                             self.missing.valid.eq(1)]
                with m.If(self.missing.ready):
                    m.next = "IDLE"
