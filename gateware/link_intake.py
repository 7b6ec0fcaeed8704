"""The host link's way in: its datagrams taken out of the engine's stream, checked whole.

UDP datagrams to the link port leave the stream on their first beat; every other packet
passes to the engine untouched and is never held up. A datagram's payload goes into a
packet FIFO as it arrives and is judged on its last beat: the UDP checksum is required
(a short frame's Ethernet padding can take its frame-check error with it, so the FCS
alone does not guard it) and must hold, the UDP length must equal the IP length, and
the payload must be whole words, at least a link header. A short frame may end on a
beat that is all padding (LiteEth's wrapper trims it to keep nothing). A datagram that
fails, or does not fit, is rolled back and counted: nothing of it is ever executed.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats import host_link as F
from ..formats.rfc998 import UDP
from .headers import fold, halfwords, lanes
from .packet_fifo import CONTROL_META, PacketFifo
from .parser import control_beat
from ..formats.rfc998 import UDP_PROTOCOL
from .streams import ip_stream

UDP_WORDS = UDP.end // 4


def big_endian(beat: Value) -> Value:
    """A 32-bit beat's four bytes in wire order, read as one big-endian number."""
    return Cat(*reversed(lanes(beat, 4)))


def beat_sum(beat: Value) -> Value:
    """The beat's two 16-bit words added, as the Internet checksum reads them."""
    return sum(halfwords(lanes(beat, 4)))


def pseudo_header(ours: int, theirs: Value, udp_length: Value, more: int = 0) -> Value:
    """The UDP checksum's pseudo-header summed (RFC 768), with ``more`` (a constant of
    the caller's) added in. The two addresses' order does not change the sum, so our own
    and the protocol fold into one constant: two adders deep, where the six terms in a
    row were five."""
    constant = (ours >> 16) + (ours & 0xFFFF) + UDP_PROTOCOL + more
    return (theirs[16:] + theirs[:16]) + (udp_length + constant)


class LinkIntake(wiring.Component):
    """``net_rx`` from LiteEth; ``engine_rx`` to the engine; ``payload``/``meta``: the
    checked datagrams' payload words (wire order in each beat) and their length in bytes,
    source address and source port. ``dropped`` strobes for each datagram dropped (two
    can end in one cycle: one cut short, one judged a cycle late)."""

    def __init__(self, address: int, port: int, depth: int, datagrams: int = F.WINDOW) -> None:
        self.address, self.port, self.depth, self.datagrams = address, port, depth, datagrams
        super().__init__({
            "net_rx": In(ip_stream(32)),
            "engine_rx": Out(ip_stream(32)),
            "payload": Out(stream.Signature(32)),
            "meta": Out(stream.Signature(CONTROL_META)),
            "dropped": Out(2),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.fifo = fifo = PacketFifo(control_beat(32), 32, self.depth, self.datagrams)
        wiring.connect(m, fifo.output, wiring.flipped(self.payload))
        wiring.connect(m, fifo.meta, wiring.flipped(self.meta))

        rx, beat = self.net_rx, self.net_rx.payload
        word = big_endian(beat.data)
        first, ours_now = Signal(init=1), Signal()
        is_link = (beat.protocol == UDP_PROTOCOL) & (word[:16] == self.port)
        ours = Mux(first, is_link, ours_now)
        m.d.comb += [self.engine_rx.payload.eq(beat), self.engine_rx.valid.eq(rx.valid & ~ours),
                     rx.ready.eq(Mux(ours, 1, self.engine_rx.ready))]
        with m.If(rx.valid & rx.ready):
            m.d.sync += [first.eq(beat.last), ours_now.eq(ours)]

        # The datagram so far: its words, whether it still adds up, its checksum's sum.
        words, broken, total = Signal(16), Signal(), Signal(32)
        udp_length, source_port = Signal(16), Signal(16)
        whole = beat.keep == 0b1111
        running = Mux(first, pseudo_header(self.address, beat.address, beat.length), total) + \
            Mux(whole, beat_sum(beat.data), 0)
        # Payload beats reach the FIFO a cycle late, so the last one is judged from the
        # finished sum (the verdict is a long path otherwise, into the FIFO's commit).
        held = Signal.like(fifo.input.payload)
        held_valid, fits = Signal(), Signal()
        """A payload beat waiting for the FIFO; and, on the last, all but the checksum is right."""
        m.d.sync += held_valid.eq(0)
        with m.If(rx.valid & ours):
            m.d.sync += [total.eq(running), words.eq(Mux(beat.last, 0, words + 1))]
            with m.If(first):
                m.d.sync += [broken.eq(~whole), source_port.eq(word[16:])]
            with m.Elif(words == 1):
                # The checksum is required: zero would mean none was sent.
                m.d.sync += [udp_length.eq(word[16:]),
                             broken.eq(broken | ~whole | (word[16:] != beat.length) | (word[:16] == 0))]
            with m.Else():
                m.d.sync += [held_valid.eq(1), held.data.eq(beat.data), held.keep.eq(beat.keep),
                             held.last.eq(beat.last), held.address.eq(beat.address)]
                # A short frame can end on a beat that is all Ethernet padding (keep 0).
                ends_right = Mux(whole, (words + 1) * 4 == udp_length, (beat.keep == 0) & (words * 4 == udp_length))
                m.d.sync += fits.eq(~broken & ends_right & ~beat.error & (udp_length >= UDP.end + F.HEADER.end))
                with m.If(~beat.last):
                    m.d.sync += broken.eq(broken | ~whole)
            with m.If(beat.last & (words < UDP_WORDS)):
                m.d.comb += self.dropped[0].eq(1)  # not even a UDP header: nothing went into the FIFO
        into = fifo.input.payload
        m.d.comb += [fifo.input.valid.eq(held_valid), into.data.eq(held.data), into.keep.eq(held.keep),
                     into.last.eq(held.last), into.address.eq(held.address),
                     into.length.eq(udp_length - UDP.end), into.port.eq(source_port)]
        with m.If(held_valid & held.last):
            good = fits & (fold(total) == 0xFFFF)
            m.d.comb += [into.bad.eq(~good), self.dropped[1].eq(~good | fifo.overflow)]
        return m
