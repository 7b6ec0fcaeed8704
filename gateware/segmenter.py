"""The transmit side: buffers cut into DATA/LDATA packets, resends ahead of new data.

RFC 969's priority pipe in hardware: a packet start goes first to a queued resend, else
to the next packet of the lowest-numbered buffer still being sent. The pacer decides
when a packet may start; the header is built from the host layouts (headers.py).
Packets go through two stages: one is made ready (chosen, sized, its run fetched, its
checksums made) while the one before it is emitted, so a store that answers late (DRAM)
costs no time between packets.
"""

from __future__ import annotations

from amaranth.asserts import AnyConst, AnySeq
from amaranth.hdl import Array, Assert, Assume, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats import rfc998 as L
from ..formats.rfc998 import UDP, UDP_PROTOCOL
from .checksum_table import ChecksumLookup
from .config import EngineConfig
from .headers import DATA_LAYOUTS, fold, halfwords, header_bytes, lanes, layouts_size, to_beats
from .streams import CONNECTION, ip_stream
from .transmit_store import RUNS, read_address, run_reader, store_fetch


TX_COMMAND = data.StructLayout({
    "resend": 1,
    "slot": 4,
    "buffer": 32,
    "length": 32,
    "last_buffer": 1,
    "packet": 16,
})
"""SEND: slot holds buffer (length bytes, last_buffer); RESEND: packet of the slot's buffer."""


TX_SETTINGS = data.StructLayout({
    "packet_size": 16,      # data bytes per packet; a multiple of the beat width (control.py)
    **CONNECTION,
    "high_ack": 16,
})
"""The connection registers the transmit side reads."""


PACKET = data.StructLayout({
    "slot": 4,
    "packet": 16,
    "resend": 1,
    "run": range(RUNS),
    "buffer": 32,
    "last_buffer": 1,
    "high_ack": 16,
    "data_bytes": 16,
    "ldata": 1,
    "data_checksum": 16,
})
"""A packet made ready to send: its header's fields, and the store's run holding its data."""


ORDER_BITS = 16
"""Low bits of the buffer numbers the next buffer to send is chosen by (_first_buffer)."""


def padded(n: Signal, multiple: int):
    return (n + multiple - 1) & ~(multiple - 1)


LOAD = data.StructLayout({"buffer": 32, "length": 32, "last_buffer": 1})
"""What SEND loaded into a slot, read back by the packet being made."""


class _SlotTable:
    """What each slot holds and how far its first sending has got; resends queued.

    What SEND loads is a small memory (LUT RAM), read by the one packet being made:
    with 16 slots, in registers it was 16-way multiplexers on a crowded part. The
    choice of the next buffer needs every slot's flags and buffer number at once, so
    those stay registers (the number's low ``ORDER_BITS``)."""

    def __init__(self, n: int, max_packets: int) -> None:
        self.loaded = Array(Signal(name=f"loaded{i}") for i in range(n))
        self.pending = Array(Signal(name=f"pending{i}") for i in range(n))
        self.order = Array(Signal(ORDER_BITS, name=f"order{i}") for i in range(n))
        self.next_packet = Array(Signal(16, name=f"next{i}") for i in range(n))
        self.loads = memory.Memory(shape=LOAD, depth=n, init=[])
        self.resends = fifo.SyncFIFOBuffered(width=4 + 16, depth=max_packets)


class Segmenter(wiring.Component):
    """Sends the packets of loaded slots, one beat per cycle while the link is ready.

    A packet is made ready in four cycles from its grant (one more for a data checksum:
    from a store that sums runs as it fetches them (``sums_runs``, slots in DRAM), its
    run's sum; else from the checksum table, or a read pass over the packet when the
    table cannot vouch for it) while the packet before it is emitted; its header and data beats follow that
    packet's last beat. A packet's data is a run the transmit store fetches from its slot
    at packet number x packet size, into the run the packet before it is not sent from;
    data bytes past the buffer's length are sent as zero padding. A packet longer than
    the store fetches is rejected.
    """

    def __init__(self, config: EngineConfig, packet_words: int, sums_runs: bool = False, formal: bool = False) -> None:
        """``formal``: the maker alone, with its properties (:meth:`properties`), for
        SymbiYosys (sim/rtl/formal.py)."""
        self.config = config
        self.packet_words = packet_words
        self.sums_runs = sums_runs
        self.formal = formal
        super().__init__({
            "settings": In(TX_SETTINGS),
            "command": In(stream.Signature(TX_COMMAND)),
            "fetch": Out(stream.Signature(store_fetch(config, packet_words, sums_runs))),
            "fetched": In(RUNS),
            "read": In(run_reader(config, packet_words)),
            **({"sums": In(data.ArrayLayout(16, RUNS))} if sums_runs else {"checksums": Out(ChecksumLookup)}),
            "grant": In(1),
            "take": Out(1),
            "out": Out(ip_stream(config.data_width)),
            "sent": Out(1),
            "sent_slot": Out(4),
            "rejected": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        table = _SlotTable(self.config.tx_slots, self.config.max_packets)
        m.submodules.resends, m.submodules.loads = table.resends, table.loads
        self._commands(m, table)
        made, sending = Signal(PACKET), Signal(PACKET)
        emitting, hand_over = Signal(), Signal()
        """The emitter has a packet; it takes ``made`` this cycle."""
        self.hand_over = hand_over
        if self.formal:  # the maker's proof: what the emitter does, the solver picks
            free = Signal()
            m.d.comb += [emitting.eq(AnySeq(1)), free.eq(AnySeq(1))]
        else:
            free = self._emit(m, sending, emitting, hand_over, made)
        self._make(m, table, made, emitting, free, hand_over)
        if self.formal:
            self.properties()
        return m

    def properties(self) -> None:
        """Every packet's fields are those of the slot it reads: its buffer's number and
        flag; its data bytes what the buffer holds from packet number x packet size on, at
        most a packet's (LDATA where that is the rest); a resend only of a packet the
        buffer has; a buffer's first sendings its packets in order from 0; and its run
        fetched from that place in the slot, whole words. One slot is watched, the
        solver's choice (so every one is), with what SEND last loaded there; a packet in
        hand when its slot is loaded again is the buffer before's, and is not judged."""
        m, cfg, made, s = self.m, self.config, self.made, self.settings
        W = cfg.beat_bytes
        self.watched = watched = AnyConst(range(cfg.tx_slots))
        self.held = held = Signal(LOAD)
        stale, self.firsts = Signal(), Signal(16)
        firsts = self.firsts
        """``firsts``: the first sendings of the watched slot's buffer handed over."""
        in_hand = ~self.fsm.ongoing("SELECT") & (made.slot == watched)
        # The host's promise: a slot is loaded again only once its buffer was acknowledged,
        # which every first sending of its packets comes before.
        m.d.comb += Assume(~(self.load.en & self.table.pending[self.load.addr]))
        self.offset_due = offset = (made.packet * s.packet_size)[:32]
        rest = held.length - offset
        self.size_due = size = Mux(rest <= s.packet_size, rest, s.packet_size)
        self.judged = judged = (made.slot == watched) & ~stale
        with m.If(self.hand_over & judged):
            m.d.comb += [
                Assert(self.table.loaded[watched] & (made.buffer == held.buffer) & (made.last_buffer == held.last_buffer),
                       "a packet carries its slot's buffer"),
                Assert((offset < held.length) & (made.data_bytes == size) & (made.ldata == (rest <= s.packet_size)),
                       "a packet's length is what its slot holds at its place"),
                Assert(made.resend | (made.packet == firsts), "a buffer's first sendings are its packets in order")]
            with m.If(~made.resend):
                m.d.sync += firsts.eq(firsts + 1)
        with m.If(self.fetch.valid & self.fetch.ready & judged):
            fetch = self.fetch.payload
            place = watched * cfg.slot_words + (offset >> (W.bit_length() - 1))
            m.d.comb += Assert((offset < held.length) & (fetch.address == place) & (fetch.words == (size + W - 1) // W)
                               & (fetch.run == made.run), "a packet's run is fetched from its place in its slot")
        # A load comes after the count above, so that it wins in the same cycle.
        with m.If(self.load.en & (self.load.addr == watched)):
            m.d.sync += [held.eq(self.load.data), firsts.eq(0), stale.eq(in_hand)]
        with m.Elif(self.fsm.ongoing("SELECT")):
            m.d.sync += stale.eq(0)
        self.invariants()

    def invariants(self) -> None:
        """What makes the proof close by induction: the slot table agrees with what was
        loaded; the packet in hand, state by state, with its slot."""
        m, made, table, s = self.m, self.made, self.table, self.settings
        watched, held = self.watched, self.held
        port = table.loads.read_port(domain="comb")
        m.d.comb += port.addr.eq(watched)
        with m.If(table.loaded[watched]):
            m.d.comb += Assert((port.data.as_value() == held.as_value()) & (held.length <= self.config.slot_bytes),
                               "the table holds what was loaded")
        next_packet = table.next_packet[watched]
        first_in_hand = self.judged & ~self.fsm.ongoing("SELECT") & ~made.resend
        measured = ~self.fsm.ongoing("SELECT") & ~self.fsm.ongoing("MULTIPLY")
        sized = measured & ~self.fsm.ongoing("MEASURE") & ~self.fsm.ongoing("SIZE")
        with m.If(table.pending[watched] & ~(first_in_hand & ~sized)):
            m.d.comb += Assert(table.loaded[watched] & ((next_packet * s.packet_size)[:32] < held.length),
                               "a pending slot has packets left")
        with m.If(table.loaded[watched]):
            m.d.comb += Assert(self.firsts + first_in_hand == next_packet, "first sendings are counted")
        with m.If(first_in_hand):
            m.d.comb += Assert((made.packet == self.firsts) & (self.offset_due < held.length)
                               & (table.pending[watched] | sized | self.fsm.ongoing("SIZE")), "first sendings are counted")
        with m.If(measured):
            m.d.comb += Assert(self.offset == self.offset_due, "a packet's offset")
        with m.If(measured & ~self.fsm.ongoing("MEASURE") & self.judged):
            m.d.comb += Assert(table.loaded[watched] & (made.buffer == held.buffer) & (made.last_buffer == held.last_buffer)
                               & (self.offset < held.length) & (self.remaining == held.length - self.offset),
                               "a packet measured is its slot's")
        with m.If(sized & self.judged):
            rest = held.length - self.offset
            m.d.comb += Assert((made.data_bytes == self.size_due) & (made.ldata == (rest <= s.packet_size)),
                               "a packet sized is its slot's")

    def _commands(self, m: Module, table: _SlotTable) -> None:
        """SEND loads a slot's row at once; RESEND queues (slot, packet)."""
        cfg, cmd, resends = self.config, self.command.payload, table.resends
        slot_ok = cmd.slot < cfg.tx_slots
        send_ok = slot_ok & (cmd.length != 0) & (cmd.length <= cfg.slot_bytes) & (self.settings.packet_size != 0)
        self.load = load = table.loads.write_port()
        m.d.comb += [self.command.ready.eq(~cmd.resend | resends.w_rdy), load.addr.eq(cmd.slot),
                     load.data.buffer.eq(cmd.buffer), load.data.length.eq(cmd.length),
                     load.data.last_buffer.eq(cmd.last_buffer)]
        with m.If(self.command.valid & self.command.ready):
            with m.If(~cmd.resend & send_ok):
                m.d.comb += load.en.eq(1)
                m.d.sync += [table.loaded[cmd.slot].eq(1), table.pending[cmd.slot].eq(1),
                             table.order[cmd.slot].eq(cmd.buffer[:ORDER_BITS]), table.next_packet[cmd.slot].eq(0)]
            with m.Elif(cmd.resend & slot_ok):
                m.d.comb += [resends.w_en.eq(1), resends.w_data.eq(cmd.packet << 4 | cmd.slot)]
            with m.Else():
                m.d.comb += self.rejected.eq(1)

    def _first_buffer(self, m: Module, table: _SlotTable) -> tuple[Value, Value, Value]:
        """The slot with the lowest-numbered buffer (the lower slot on a tie) of those
        with packets still to send for the first time: whether there is one, which, and
        whether any slot has such packets now.

        Buffer numbers are ordered as serial numbers (RFC 1982) on their low
        ``ORDER_BITS``: the buffers loaded at once are a few slots apart, so this holds
        across the 32-bit wrap and halves each compare. A tournament of pairs, so 16
        slots compare in 4 levels. Beyond one level, every second level's winners are
        registers, and so is the result (the compares and their multiplexers fill a
        50 MHz cycle on a crowded part): the choice is then a cycle or two old, so a
        slot it names is taken only while still pending."""
        n = self.config.tx_slots

        def entrant(domain, found, slot, buffer):
            signals = Signal(name="found"), Signal(range(n), name="slot"), Signal(ORDER_BITS, name="buffer")
            domain += [signal.eq(value) for signal, value in zip(signals, (found, slot, buffer))]
            return signals

        entrants = [(table.pending[i], Const(i, range(n)), table.order[i]) for i in range(n)]
        levels = (n - 1).bit_length()
        for level in range(1, levels + 1):
            domain = m.d.sync if level % 2 == 0 and levels > 1 else m.d.comb
            winners = []
            for (a_found, a_slot, a_buffer), (b_found, b_slot, b_buffer) in zip(entrants[::2], entrants[1::2]):
                b_first = (b_buffer - a_buffer)[ORDER_BITS - 1]  # b - a is negative
                b_wins = b_found & (~a_found | b_first)
                winners.append(entrant(domain, a_found | b_found, Mux(b_wins, b_slot, a_slot),
                                       Mux(b_wins, b_buffer, a_buffer)))
            if len(entrants) % 2:  # the odd one out goes up a level as it is
                winners.append(entrant(domain, *entrants[-1]))
            entrants = winners
        found, slot, _ = entrants[0]
        if levels <= 1:
            return found, slot, found
        if levels % 2:
            chosen_found, chosen = Signal(), Signal(range(n))
            m.d.sync += [chosen_found.eq(found), chosen.eq(slot)]
            found, slot = chosen_found, chosen
        return found & table.pending[slot], slot, Cat(*table.pending).any()

    def _fields(self, packet, checksum=0) -> dict:
        """The header fields of a packet record."""
        s = self.settings
        return {
            "version": L.VERSION, "type": Mux(packet.ldata, L.PacketType.LDATA, L.PacketType.DATA),
            "length": layouts_size(DATA_LAYOUTS) + packet.data_bytes, "local_port": s.local_port,
            "foreign_port": s.peer_port, "buffer": packet.buffer, "high_ack": packet.high_ack,
            "packet": packet.packet, "data_checksum": packet.data_checksum, "checksum": checksum,
            "flags": Mux(packet.last_buffer, L.FLAG_LAST_BUFFER, 0),
        }

    def _data_lanes(self, packet, index, word):
        """The data bytes of beat ``index`` of a packet's data area, padding zeroed, and
        how many bytes of the packet's data the beat starts with."""
        W = self.config.beat_bytes
        valid = packet.data_bytes - index * W
        return [Mux(i < valid, byte, 0) for i, byte in enumerate(lanes(word, W))], valid

    def _make(self, m: Module, table: _SlotTable, made, emitting, free, hand_over) -> None:
        """The maker: a packet chosen at a grant, sized, its run fetched and its data
        checksum made, handed to the emitter with its header's checksum once its run is
        there and the emitter is free. A read pass waits until the emitter is idle (they
        share the run's read port)."""
        self.m, self.table, self.made, self.emitting = m, table, made, emitting
        W = self.config.beat_bytes
        self.found, self.best, self.waiting = self._first_buffer(m, table)
        self.loaded = loaded = table.loads.read_port(domain="comb")
        m.d.comb += loaded.addr.eq(made.slot)
        offset = Signal(32)
        remaining = Signal(32)
        data_sum = Signal(32)
        sum_beat = Signal(16)
        arrived = Signal(RUNS)
        """Runs whose fetch has come (``self.fetched`` pulsed) since it was taken."""
        self.offset, self.remaining, self.data_sum, self.sum_beat, self.arrived = (
            offset, remaining, data_sum, sum_beat, arrived)
        m.d.sync += arrived.eq(arrived | self.fetched)
        self.have_data = have_data = (arrived | self.fetched).bit_select(made.run, 1)
        self.data_beats = (made.data_bytes + W - 1) // W
        self.base = made.slot * self.config.slot_words + (offset >> (W.bit_length() - 1))

        with m.FSM() as self.fsm:
            with m.State("SELECT"):
                self._select()
            with m.State("MULTIPLY"):
                m.d.sync += offset.eq(made.packet * self.settings.packet_size)
                m.next = "MEASURE"
            with m.State("MEASURE"):
                self._measure()
            with m.State("SIZE"):
                self._size()
            with m.State("LOOKUP"):
                self._lookup()
            if not self.sums_runs:  # a read pass, where a sum may be missing
                with m.State("SUM"):
                    self._read_pass()
                with m.State("FOLD"):
                    m.d.sync += made.data_checksum.eq(~fold(data_sum))
                    m.next = "HAND_OVER"
            with m.State("HAND_OVER"):
                with m.If(have_data & free):
                    m.d.comb += hand_over.eq(1)
                    m.d.sync += made.run.eq(made.run + 1)
                    m.next = "SELECT"

    def _select(self) -> None:
        """At a grant: a queued resend first, else the next packet of the chosen buffer."""
        m, made, table, resends = self.m, self.made, self.table, self.table.resends
        m.d.comb += self.idle.eq(~resends.r_rdy & ~self.waiting & ~self.emitting)
        with m.If(self.grant & resends.r_rdy):
            m.d.comb += [resends.r_en.eq(1), self.take.eq(1)]
            m.d.sync += [made.slot.eq(resends.r_data[:4]), made.packet.eq(resends.r_data[4:]),
                         made.resend.eq(1)]
            m.next = "MULTIPLY"
        with m.Elif(self.grant & self.found):
            best = self.best
            m.d.comb += self.take.eq(1)
            m.d.sync += [made.slot.eq(best), made.packet.eq(table.next_packet[best]), made.resend.eq(0),
                         table.next_packet[best].eq(table.next_packet[best] + 1)]
            m.next = "MULTIPLY"

    def _measure(self) -> None:
        """What the slot's buffer has from the packet's offset on; a resend of a packet
        the buffer does not have is rejected."""
        m, made, loaded, offset = self.m, self.made, self.loaded, self.offset
        m.d.sync += [self.remaining.eq(loaded.data.length - offset), self.data_sum.eq(0), self.sum_beat.eq(0),
                     made.data_checksum.eq(0), made.buffer.eq(loaded.data.buffer),
                     made.last_buffer.eq(loaded.data.last_buffer)]
        with m.If(~self.table.loaded[made.slot] | (offset >= loaded.data.length)):
            m.d.comb += self.rejected.eq(1)
            m.next = "SELECT"
        with m.Else():
            m.next = "SIZE"

    def _size(self) -> None:
        """The packet's size (LDATA: what is left), and its run fetched from the store."""
        m, made, s, W = self.m, self.made, self.settings, self.config.beat_bytes
        remaining, packet_size = self.remaining, s.packet_size
        last = remaining <= packet_size
        size = Mux(last, remaining, packet_size)
        words = (size + W - 1) // W
        m.d.sync += [made.ldata.eq(last), made.data_bytes.eq(size), made.high_ack.eq(s.high_ack)]
        if self.sums_runs:
            last_bytes = size - (words - 1) * W  # 1 to W
            m.d.comb += self.fetch.payload.keep.eq(Cat(*(i < last_bytes for i in range(W))))
        else:
            q = self.checksums.query
            m.d.comb += [q.slot.eq(made.slot), q.packet.eq(made.packet), q.end.eq(self.offset + size),
                         q.full.eq(~last | (remaining == packet_size))]
        m.d.comb += [self.fetch.payload.address.eq(self.base), self.fetch.payload.words.eq(words),
                     self.fetch.payload.run.eq(made.run)]
        with m.If(~made.resend & last):
            m.d.sync += self.table.pending[made.slot].eq(0)
        with m.If(words > self.packet_words):
            m.d.comb += self.rejected.eq(1)
            m.next = "SELECT"
        with m.Else():
            # The run is fetched while the checksums are made; a read pass and
            # the hand-over wait for it.
            m.d.comb += self.fetch.valid.eq(1)
            with m.If(self.fetch.ready):
                m.d.sync += self.arrived.bit_select(made.run, 1).eq(0)
                with m.If(s.data_checksum):
                    m.next = "LOOKUP"
                with m.Else():
                    m.next = "HAND_OVER"

    def _lookup(self) -> None:
        """The packet's data checksum, from a sum made earlier where there is one."""
        m, made = self.m, self.made
        if self.sums_runs:
            # The store's sum of the run, made as it was fetched.
            with m.If(self.have_data):
                m.d.sync += made.data_checksum.eq(~self.sums[made.run])
                m.next = "HAND_OVER"
        else:
            # The sum made while the slot was written, if it covers this packet exactly.
            with m.If(self.checksums.known):
                m.d.sync += made.data_checksum.eq(~self.checksums.sum)
                m.next = "HAND_OVER"
            with m.Else():
                m.next = "SUM"

    def _read_pass(self) -> None:
        """Else a read pass: the data checksum goes in the header, ahead of the data."""
        m, made, sum_beat = self.m, self.made, self.sum_beat
        with m.If(~self.emitting):
            m.d.comb += self.read.addr.eq(read_address(made.run, sum_beat, self.packet_words))
            with m.If(self.have_data):
                m.d.sync += sum_beat.eq(sum_beat + 1)
            with m.If(sum_beat != 0):
                masked, _ = self._data_lanes(made, sum_beat - 1, self.read.data)
                m.d.sync += self.data_sum.eq(self.data_sum + sum(halfwords(masked)))
            with m.If(sum_beat == self.data_beats):
                m.next = "FOLD"

    def _emit(self, m: Module, sending, emitting, hand_over, made) -> Value:
        """The emitter: the packet handed over, its header (summed as it is taken) and
        data beats streamed from its run. Returns 'the emitter takes a packet this
        cycle': when idle, or as its last beat goes."""
        cfg, s = self.config, self.settings
        W = cfg.beat_bytes
        beat = Signal(16)
        checksum = Signal(16)
        unsummed = header_bytes(DATA_LAYOUTS, self._fields(made))
        header = header_bytes(DATA_LAYOUTS, self._fields(sending, checksum))
        ip_length = Mux(s.udp, 8, 0) + padded(layouts_size(DATA_LAYOUTS) + sending.data_bytes, L.ALIGNMENT)
        udp = header_bytes([UDP], {"source_port": s.udp_local_port, "dest_port": s.udp_peer_port,
                                   "length": ip_length})
        header_words = Array(to_beats(udp + header, W))
        plain_words = Array(to_beats(header, W))
        udp_beats = 8 // W if W <= 8 else 0
        header_beats = layouts_size(DATA_LAYOUTS) // W
        first_data = Signal(16)
        m.d.comb += first_data.eq(Mux(s.udp, udp_beats + header_beats, header_beats))
        total_beats = first_data + (sending.data_bytes + W - 1) // W

        out = self.out.payload
        advance = self.out.ready
        in_header = beat < first_data
        masked, valid = self._data_lanes(sending, beat - first_data, self.read.data)
        sent_bytes = padded(valid, L.ALIGNMENT)
        m.d.comb += [out.address.eq(s.peer_address),
                     out.protocol.eq(Mux(s.udp, UDP_PROTOCOL, L.IP_PROTOCOL)),
                     out.length.eq(ip_length),
                     out.data.eq(Mux(in_header, Mux(s.udp, header_words[beat], plain_words[beat]), Cat(*masked))),
                     out.keep.eq(Cat(*(in_header | (i < sent_bytes) for i in range(W)))),
                     out.last.eq(beat == total_beats - 1)]
        with m.If(emitting):
            index = beat + advance - first_data
            m.d.comb += [self.out.valid.eq(1),
                         self.read.addr.eq(read_address(sending.run, index, self.packet_words))]
            with m.If(advance):
                m.d.sync += beat.eq(beat + 1)
                with m.If(out.last):
                    m.d.comb += [self.sent.eq(~sending.resend & sending.ldata), self.sent_slot.eq(sending.slot)]
                    m.d.sync += emitting.eq(0)
        with m.If(hand_over):
            m.d.sync += [sending.eq(made), checksum.eq(~fold(sum(halfwords(unsummed)))),
                         emitting.eq(1), beat.eq(0)]
        return ~emitting | (advance & out.last)
