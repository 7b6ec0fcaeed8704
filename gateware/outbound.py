"""What leaves the engine: the host's control packets, sent ahead of DATA.

The host writes a control packet a word at a time, then its length; the packet is
queued only if the words and the length agree (a packet FIFO rolls back the rest).
At each packet boundary the link goes to a queued control packet first, else to the
segmenter: control messages are few and small, and RFC 998 wants them prompt.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..formats import rfc998 as L
from ..formats.rfc998 import UDP, UDP_PROTOCOL
from .config import EngineConfig
from .headers import header_bytes, to_beats
from .packet_fifo import PacketFifo
from .parser import control_beat
from .segmenter import TX_SETTINGS, padded
from .streams import ip_stream


class Outbound(wiring.Component):
    def __init__(self, config: EngineConfig) -> None:
        if config.data_width != 32:
            raise ValueError("the host's control-packet path is built for a 32-bit datapath")
        self.config = config
        super().__init__({
            "settings": In(TX_SETTINGS),
            "word": In(32),
            "push": In(1),
            "length": In(16),
            "commit": In(1),
            "data": In(ip_stream(config.data_width)),
            "out": Out(ip_stream(config.data_width)),
            "sent": Out(1),
            "rejected": Out(1),
        })

    def elaborate(self, platform) -> Module:
        cfg, s = self.config, self.settings
        m = Module()
        m.submodules.fifo = fifo = PacketFifo(control_beat(32), 32, cfg.fifo_depth)

        # Hold the newest word back: only the length tells which word is the last.
        held, holding = Signal(32), Signal()
        words = Signal(16)
        beat = fifo.input.payload
        m.d.comb += beat.keep.eq(0b1111)  # whole words, as the host writes them
        whole = (self.length >= L.HEADER.end) & holding & (words == (self.length + 3) >> 2)
        with m.If(self.commit):
            m.d.comb += [fifo.input.valid.eq(holding), beat.data.eq(held), beat.last.eq(1),
                         beat.bad.eq(~whole), beat.length.eq(self.length),
                         self.rejected.eq(~whole | fifo.overflow)]
            m.d.sync += [holding.eq(0), words.eq(0)]
        with m.Elif(self.push):
            m.d.comb += [fifo.input.valid.eq(holding), beat.data.eq(held)]
            m.d.sync += [held.eq(self.word), holding.eq(1), words.eq(words + 1)]

        # Emit: the UDP header if in UDP mode, then the words.
        length = fifo.meta.payload.length
        ip_length = Mux(s.udp, 8, 0) + padded(length, L.ALIGNMENT)
        udp = to_beats(header_bytes([UDP], {"source_port": s.udp_local_port,
                                            "dest_port": s.udp_peer_port, "length": ip_length}), 4)
        udp_beat = Signal(range(len(udp) + 1))
        control = Signal.like(self.out.payload)
        control_valid, control_ready = Signal(), Signal()
        in_udp = s.udp & (udp_beat < len(udp))
        m.d.comb += [
            control.address.eq(s.peer_address),
            control.protocol.eq(Mux(s.udp, UDP_PROTOCOL, L.IP_PROTOCOL)),
            control.length.eq(ip_length), control.keep.eq(0b1111),
            control.data.eq(Mux(in_udp, Mux(udp_beat == 0, udp[0], udp[1]), fifo.output.payload)),
            control_valid.eq(fifo.meta.valid & (in_udp | fifo.output.valid)),
        ]
        remaining = Signal(16)
        first = Signal(init=1)
        words_left = Mux(first, (length + 3) >> 2, remaining)
        m.d.comb += control.last.eq(~in_udp & (words_left == 1))
        with m.If(control_valid & control_ready):
            with m.If(in_udp):
                m.d.sync += udp_beat.eq(udp_beat + 1)
            with m.Else():
                m.d.comb += fifo.output.ready.eq(1)
                m.d.sync += [remaining.eq(words_left - 1), first.eq(0)]
                with m.If(control.last):
                    m.d.comb += [fifo.meta.ready.eq(1), self.sent.eq(1)]
                    m.d.sync += [udp_beat.eq(0), first.eq(1)]

        # At packet boundaries: a waiting control packet first, then DATA.
        owner = Signal(range(3))
        FREE, CONTROL, DATA = range(3)
        pick = Mux(owner != FREE, owner, Mux(fifo.meta.valid, CONTROL, Mux(self.data.valid, DATA, FREE)))
        with m.Switch(pick):
            with m.Case(CONTROL):
                m.d.comb += [self.out.payload.eq(control), self.out.valid.eq(control_valid),
                             control_ready.eq(self.out.ready)]
                with m.If(self.out.valid & self.out.ready):
                    m.d.sync += owner.eq(Mux(control.last, FREE, CONTROL))
            with m.Case(DATA):
                m.d.comb += [self.out.payload.eq(self.data.payload), self.out.valid.eq(self.data.valid),
                             self.data.ready.eq(self.out.ready)]
                with m.If(self.out.valid & self.out.ready):
                    m.d.sync += owner.eq(Mux(self.data.payload.last, FREE, DATA))
        return m
