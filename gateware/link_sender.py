"""The host link's way out: a stored datagram (a reply, or an event push) sent as UDP.

The executor writes a datagram's payload into the store and hands the sender its place,
its length and the ones'-complement sum of its words; the sender adds the UDP header
with the checksum over the pseudo-header. A DOWNLOAD's reply takes its link header from
the store and its body from ``body``, words read from slot memory as they leave, so it
goes without a checksum (0, as IPv4 allows: the Ethernet FCS guards it on the wire and
the transfer's SHA-256 end to end).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats import host_link as F
from ..formats.rfc998 import UDP, UDP_PROTOCOL
from .headers import fold, header_bytes, to_beats
from .link_intake import pseudo_header
from .streams import ip_stream

AREA_WORDS = 64
"""One stored reply with its link header: up to F.MAX_OPERATIONS operations."""
STATUS_WORDS = 128
"""A status snapshot: the link header, REGISTER_MAP and every register."""
PUSH_WORDS = F.PUSH_WORDS
"""An event push: its header, its events and control packets (formats/host_link.py)."""
SCRATCH = F.WINDOW * AREA_WORDS
"""Replies kept for replay (one area for each ID in the window) lie below; here, those
not kept (refusals, OPEN)."""
STATUS_AREA, PUSH_AREA = SCRATCH + AREA_WORDS, SCRATCH + AREA_WORDS + STATUS_WORDS
STORE_WORDS = PUSH_AREA + PUSH_WORDS
"""The store's areas, in 32-bit words: 3008, six of the ECP5's block RAMs."""
STORE_ADDRESS_WIDTH = (STORE_WORDS - 1).bit_length()

SEND_COMMAND = data.StructLayout({
    "start": range(STORE_WORDS),
    "stored": 12,  # payload words from the store, from ``start`` on
    "words": 12,  # payload words in all; those past ``stored`` come from the body stream
    "sum": 32,  # the stored words' 16-bit halves added, for the checksum (unused when streamed)
    "address": 32,
    "port": 16,
})


class LinkSender(wiring.Component):
    def __init__(self, address: int, port: int) -> None:
        self.address, self.port = address, port
        super().__init__({
            "command": In(stream.Signature(SEND_COMMAND)),
            "store": In(memory.ReadPort.Signature(addr_width=STORE_ADDRESS_WIDTH, shape=32)),
            "body": In(stream.Signature(32)),
            "out": Out(ip_stream(32)),
            "sent": Out(1),
            "busy": Out(1),
            "start": Out(STORE_ADDRESS_WIDTH),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        c = Signal(SEND_COMMAND)
        udp_length = Signal(16)
        checksum = Signal(16)
        streamed = c.words != c.stored
        # The UDP header's ports and length, the payload's sum and the pseudo-header (whose
        # length is the header's: counted twice, doubled), three adders deep. The checksum
        # is in the header's second beat, sent a cycle after ``c`` is taken at the
        # earliest, so it is registered: ``c`` holds still while the datagram is sent.
        total = (c.port + c.sum) + pseudo_header(self.address, c.address, Cat(0, udp_length), more=self.port)
        folded = ~fold(total)[:16]
        m.d.sync += checksum.eq(Mux(streamed, 0, Mux(folded == 0, 0xFFFF, folded)))
        udp = to_beats(header_bytes([UDP], {"source_port": self.port, "dest_port": c.port,
                                            "length": udp_length, "checksum": checksum}), 4)
        m.d.comb += self.start.eq(c.start)
        # Where the datagram is, all in registers: the ready path from LiteEth meets no adder.
        header_beat = Signal(range(len(udp) + 1))
        """The UDP header's beat being sent; ``len(udp)`` once into the payload."""
        stored_left, remaining = Signal(12), Signal(13)
        """Stored payload words not yet sent; beats after this one."""
        here, after = Signal(STORE_ADDRESS_WIDTH), Signal(STORE_ADDRESS_WIDTH)
        """The store's address of this beat's word, and of the next one."""
        out = self.out.payload
        in_header, from_store = header_beat != len(udp), stored_left != 0
        m.d.comb += [out.address.eq(c.address), out.protocol.eq(UDP_PROTOCOL), out.length.eq(udp_length),
                     out.keep.eq(0b1111), out.last.eq(remaining == 0)]
        # The store's read port runs a word ahead: it addresses the next beat's word.
        take = self.out.valid & self.out.ready
        m.d.comb += [self.store.addr.eq(Mux(take & ~in_header, after, here)), self.store.en.eq(1)]
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.command.ready.eq(1)
                command = self.command.payload
                with m.If(self.command.valid):
                    m.d.sync += [c.eq(command), header_beat.eq(0), stored_left.eq(command.stored),
                                 remaining.eq(command.words + len(udp) - 1), here.eq(command.start),
                                 after.eq(command.start + 1), udp_length.eq(UDP.end + 4 * command.words)]
                    m.next = "SEND"
            with m.State("SEND"):
                m.d.comb += self.busy.eq(1)
                with m.If(in_header):
                    m.d.comb += [self.out.valid.eq(1), out.data.eq(Mux(header_beat == 0, udp[0], udp[1]))]
                with m.Elif(from_store):
                    m.d.comb += [self.out.valid.eq(1), out.data.eq(self.store.data)]
                with m.Else():
                    m.d.comb += [self.out.valid.eq(self.body.valid), out.data.eq(self.body.payload),
                                 self.body.ready.eq(self.out.ready)]
                with m.If(take):
                    m.d.sync += remaining.eq(remaining - 1)
                    with m.If(in_header):
                        m.d.sync += header_beat.eq(header_beat + 1)
                    with m.Else():
                        m.d.sync += [here.eq(after), after.eq(after + 1)]
                        with m.If(from_store):
                            m.d.sync += stored_left.eq(stored_left - 1)
                    with m.If(out.last):
                        m.d.comb += self.sent.eq(1)
                        m.next = "IDLE"
        return m
