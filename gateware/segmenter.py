"""The transmit side: buffers cut into DATA/LDATA packets, resends ahead of new data.

RFC 969's priority pipe in hardware: a packet start goes first to a queued resend, else
to the next packet of the lowest-numbered buffer still being sent. The pacer decides
when a packet may start; the header is built from the host layouts (headers.py).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from netblt.host import layout as L

from .checksum_table import ChecksumLookup
from .config import EngineConfig
from .headers import DATA_LAYOUTS, UDP, fold, halfwords, header_bytes, lanes, layouts_size, to_beats
from .streams import CONNECTION, ip_stream
from .transmit_store import run_reader, store_fetch

UDP_PROTOCOL = 17

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


def padded(n: Signal, multiple: int):
    return (n + multiple - 1) & ~(multiple - 1)


class Segmenter(wiring.Component):
    """Sends the packets of loaded slots, one beat per cycle while the link is ready.

    Per packet the engine spends five cycles choosing, sizing and checksumming the
    header (one more for a data checksum from the checksum table, or a read pass over
    the packet when the table cannot vouch for it), then streams the header and data
    beats. A packet's data is a run the transmit store fetches from its slot at packet
    number x packet size while the header is made (longer only when the store makes it
    wait); data bytes past the buffer's length are sent as zero padding. A packet longer
    than the store fetches is rejected.
    """

    def __init__(self, config: EngineConfig, packet_words: int) -> None:
        self.config = config
        self.packet_words = packet_words
        super().__init__({
            "settings": In(TX_SETTINGS),
            "command": In(stream.Signature(TX_COMMAND)),
            "fetch": Out(stream.Signature(store_fetch(config, packet_words))),
            "fetched": In(1),
            "read": In(run_reader(config, packet_words)),
            "checksums": Out(ChecksumLookup),
            "grant": In(1),
            "take": Out(1),
            "out": Out(ip_stream(config.data_width)),
            "sent": Out(1),
            "sent_slot": Out(4),
            "rejected": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform) -> Module:
        cfg, s = self.config, self.settings
        W = cfg.beat_bytes
        m = Module()

        # The slot table: what each slot holds and how far its first sending has got.
        n = cfg.tx_slots
        loaded = Array(Signal(name=f"loaded{i}") for i in range(n))
        pending = Array(Signal(name=f"pending{i}") for i in range(n))
        buffer = Array(Signal(32, name=f"buffer{i}") for i in range(n))
        length = Array(Signal(32, name=f"length{i}") for i in range(n))
        last_buffer = Array(Signal(name=f"last_buffer{i}") for i in range(n))
        next_packet = Array(Signal(16, name=f"next{i}") for i in range(n))

        m.submodules.resends = resends = fifo.SyncFIFOBuffered(width=4 + 16, depth=cfg.max_packets)
        packet_size = s.packet_size

        # Commands: SEND loads a slot's row at once; RESEND queues (slot, packet).
        cmd = self.command.payload
        slot_ok = cmd.slot < n
        send_ok = slot_ok & (cmd.length != 0) & (cmd.length <= cfg.slot_bytes) & (packet_size != 0)
        m.d.comb += self.command.ready.eq(~cmd.resend | resends.w_rdy)
        with m.If(self.command.valid & self.command.ready):
            with m.If(~cmd.resend & send_ok):
                m.d.sync += [loaded[cmd.slot].eq(1), pending[cmd.slot].eq(1),
                             buffer[cmd.slot].eq(cmd.buffer), length[cmd.slot].eq(cmd.length),
                             last_buffer[cmd.slot].eq(cmd.last_buffer),
                             next_packet[cmd.slot].eq(0)]
            with m.Elif(cmd.resend & slot_ok):
                m.d.comb += [resends.w_en.eq(1), resends.w_data.eq(cmd.packet << 4 | cmd.slot)]
            with m.Else():
                m.d.comb += self.rejected.eq(1)

        # The lowest-numbered buffer with packets still to send for the first time.
        best, found = Signal(range(n)), Signal()
        chain_found, chain_best, chain_buffer = Const(0), Const(0, range(n)), Const(0, 32)
        for i in range(n):
            better = pending[i] & (~chain_found | (buffer[i] < chain_buffer))
            chain_found = chain_found | pending[i]
            chain_best = Mux(better, i, chain_best)
            chain_buffer = Mux(better, buffer[i], chain_buffer)
        m.d.comb += [found.eq(chain_found), best.eq(chain_best)]

        # The packet being sent.
        slot = Signal(range(n))
        packet = Signal(16)
        is_resend = Signal()
        offset = Signal(32)
        remaining = Signal(32)
        data_bytes = Signal(16)
        ldata = Signal()
        data_sum = Signal(32)
        data_checksum = Signal(16)
        """The header's data checksum field, set before the header is summed."""
        checksum = Signal(16)
        high_ack = Signal(16)
        """The stamp, taken once per packet: the host may change HIGH_ACK while it is emitted."""
        beat = Signal(16)
        sum_beat = Signal(16)
        fetched = Signal()
        """The packet's run came before this cycle (``self.fetched`` pulsed)."""
        m.d.sync += fetched.eq(fetched | self.fetched)
        have_data = fetched | self.fetched
        """The packet's run may be read: it may be summed and sent."""

        udp_beats = 8 // W if W <= 8 else 0
        header_beats = layouts_size(DATA_LAYOUTS) // W
        data_beats = (data_bytes + W - 1) // W
        first_data = Signal(16)
        m.d.comb += first_data.eq(Mux(s.udp, udp_beats + header_beats, header_beats))
        total_beats = first_data + data_beats
        netblt_length = layouts_size(DATA_LAYOUTS) + data_bytes
        ip_length = Mux(s.udp, 8, 0) + padded(netblt_length, L.ALIGNMENT)
        base = slot * cfg.slot_words + (offset >> (W.bit_length() - 1))

        fields = {
            "version": L.VERSION, "type": Mux(ldata, L.PacketType.LDATA, L.PacketType.DATA),
            "length": netblt_length, "local_port": s.local_port, "foreign_port": s.peer_port,
            "buffer": buffer[slot], "high_ack": high_ack, "packet": packet,
            "data_checksum": data_checksum,
            "flags": Mux(last_buffer[slot], L.FLAG_LAST_BUFFER, 0),
        }
        unsummed = header_bytes(DATA_LAYOUTS, fields)
        header = header_bytes(DATA_LAYOUTS, {**fields, "checksum": checksum})
        udp = header_bytes([UDP], {"source_port": s.udp_local_port, "dest_port": s.udp_peer_port,
                                   "length": ip_length})
        header_words = Array(to_beats(udp + header, W))
        plain_words = Array(to_beats(header, W))

        def data_lanes(index, word):
            """The data bytes of beat ``index`` of the data area, padding zeroed."""
            valid = data_bytes - index * W
            return [Mux(i < valid, byte, 0) for i, byte in enumerate(lanes(word, W))], valid

        out = self.out.payload
        m.d.comb += [out.address.eq(s.peer_address),
                     out.protocol.eq(Mux(s.udp, UDP_PROTOCOL, L.IP_PROTOCOL)),
                     out.length.eq(ip_length)]

        with m.FSM():
            with m.State("SELECT"):
                m.d.comb += self.idle.eq(~resends.r_rdy & ~found)
                with m.If(self.grant & resends.r_rdy):
                    m.d.comb += [resends.r_en.eq(1), self.take.eq(1)]
                    m.d.sync += [slot.eq(resends.r_data[:4]), packet.eq(resends.r_data[4:]),
                                 is_resend.eq(1)]
                    m.next = "MULTIPLY"
                with m.Elif(self.grant & found):
                    m.d.comb += self.take.eq(1)
                    m.d.sync += [slot.eq(best), packet.eq(next_packet[best]), is_resend.eq(0),
                                 next_packet[best].eq(next_packet[best] + 1)]
                    m.next = "MULTIPLY"
            with m.State("MULTIPLY"):
                m.d.sync += offset.eq(packet * packet_size)
                m.next = "MEASURE"
            with m.State("MEASURE"):
                m.d.sync += [remaining.eq(length[slot] - offset), data_sum.eq(0), sum_beat.eq(0),
                             data_checksum.eq(0)]
                with m.If(~loaded[slot] | (offset >= length[slot])):
                    # A resend of a packet the slot's buffer does not have.
                    m.d.comb += self.rejected.eq(1)
                    m.next = "SELECT"
                with m.Else():
                    m.next = "SIZE"
            with m.State("SIZE"):
                last = remaining <= packet_size
                size = Mux(last, remaining, packet_size)
                words = (size + W - 1) // W
                m.d.sync += [ldata.eq(last), data_bytes.eq(size), high_ack.eq(s.high_ack)]
                m.d.comb += [self.checksums.query.slot.eq(slot), self.checksums.query.packet.eq(packet),
                             self.checksums.query.end.eq(offset + size),
                             self.checksums.query.full.eq(~last | (remaining == packet_size)),
                             self.fetch.payload.address.eq(base), self.fetch.payload.words.eq(words)]
                with m.If(~is_resend & last):
                    m.d.sync += pending[slot].eq(0)
                with m.If(words > self.packet_words):
                    m.d.comb += self.rejected.eq(1)
                    m.next = "SELECT"
                with m.Else():
                    # The run is fetched while the header is made; SUM and EMIT wait for it.
                    m.d.comb += self.fetch.valid.eq(1)
                    with m.If(self.fetch.ready):
                        m.d.sync += fetched.eq(0)
                        with m.If(s.data_checksum):
                            m.next = "LOOKUP"
                        with m.Else():
                            m.next = "HEADER"
            with m.State("LOOKUP"):
                # The sum made while the slot was written, if it covers this packet exactly.
                with m.If(self.checksums.known):
                    m.d.sync += data_checksum.eq(~self.checksums.sum)
                    m.next = "HEADER"
                with m.Else():
                    m.next = "SUM"
            with m.State("SUM"):
                # Else a read pass: the data checksum goes in the header, ahead of the data.
                m.d.comb += self.read.addr.eq(sum_beat)
                with m.If(have_data):
                    m.d.sync += sum_beat.eq(sum_beat + 1)
                with m.If(sum_beat != 0):
                    masked, _ = data_lanes(sum_beat - 1, self.read.data)
                    m.d.sync += data_sum.eq(data_sum + sum(halfwords(masked)))
                with m.If(sum_beat == data_beats):
                    m.next = "FOLD"
            with m.State("FOLD"):
                m.d.sync += data_checksum.eq(~fold(data_sum))
                m.next = "HEADER"
            with m.State("HEADER"):
                m.d.sync += [checksum.eq(~fold(sum(halfwords(unsummed)))), beat.eq(0)]
                with m.If(have_data):
                    m.next = "EMIT"
            with m.State("EMIT"):
                advance = self.out.ready
                m.d.comb += self.read.addr.eq(beat + advance - first_data)
                in_header = beat < first_data
                masked, valid = data_lanes(beat - first_data, self.read.data)
                sent_bytes = padded(valid, L.ALIGNMENT)
                m.d.comb += [
                    self.out.valid.eq(1),
                    out.data.eq(Mux(in_header, Mux(s.udp, header_words[beat], plain_words[beat]),
                                    Cat(*masked))),
                    out.keep.eq(Cat(*(in_header | (i < sent_bytes) for i in range(W)))),
                    out.last.eq(beat == total_beats - 1),
                ]
                with m.If(advance):
                    m.d.sync += beat.eq(beat + 1)
                    with m.If(out.last):
                        m.d.comb += [self.sent.eq(~is_resend & ldata), self.sent_slot.eq(slot)]
                        m.next = "SELECT"
        return m
