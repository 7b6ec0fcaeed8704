"""The receive side assembled: parser, reassembly, receive store, control FIFO, sink port."""

from __future__ import annotations

from amaranth.hdl import Module, Mux
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats.drops import Drop
from .config import EngineConfig
from .dram_slots import dram_members
from .packet_fifo import CONTROL_META, PacketFifo
from .parser import RX_SETTINGS, Parser, control_beat
from .pattern import PATTERN_COMMAND
from .reassembly import MISSING, MISSING_QUERY, RX_COMMAND, RX_EVENT, SLOT_STATUS, Reassembly
from .receive_store import READ_AHEAD, receive_store
from .sink_port import PatternChecker, SinkDrain, sink_word
from .streams import ip_stream


class Receiver(wiring.Component):
    """IP payloads in; buffers in the receive store, control packets and events out.

    The store is where the configuration puts the slots: block RAM, or DRAM through
    ``dram``, the caller's to connect. Its one reader serves a DRAIN to the sink port
    while it runs (the pattern checker watching, where the configuration has one) and the
    host's downloads otherwise; when a drain ends, the downloads' own seek is the
    caller's to repeat (control_status.py does).
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.store = receive_store(config)
        super().__init__({
            "settings": In(RX_SETTINGS),
            "packet_size": In(16),  # data bytes per packet, whole beats (control.py rounds it)
            "input": In(ip_stream(config.data_width)),
            "command": In(stream.Signature(RX_COMMAND)),
            "query": In(stream.Signature(MISSING_QUERY)),
            "missing": Out(stream.Signature(MISSING)),
            "event": Out(stream.Signature(RX_EVENT)),
            **({"drain": In(stream.Signature(PATTERN_COMMAND)), "drained": Out(1),
                "sink": Out(stream.Signature(sink_word(config.data_width))), "mismatches": Out(32)}
               if config.sink else {}),
            "control": Out(stream.Signature(config.data_width)),
            "control_meta": Out(stream.Signature(CONTROL_META)),
            # The store's reader: words in order from a seek, ``download_level`` of them ready.
            "download_seek": In(stream.Signature(config.rx_address_width)),
            "download": Out(stream.Signature(config.data_width)),
            "download_level": Out(range(READ_AHEAD + 1)),
            "status_slot": In(4),
            "status": Out(SLOT_STATUS),
            "high_ack": Out(16),
            "drops": Out(len(Drop)),
            "accepted": Out(1),
            "duplicate": Out(1),
            "events_lost": Out(1),
            "control_queued": Out(1),
            **dram_members(config, "dram"),
        })

    def elaborate(self, platform) -> Module:
        cfg = self.config
        m = Module()
        m.submodules.store = store = self.store
        if cfg.dram:
            wiring.connect(m, store.dram, wiring.flipped(self.dram))
        m.submodules.parser = parser = Parser(cfg)
        m.submodules.reassembly = reassembly = Reassembly(cfg, self.store.packet_words * cfg.beat_bytes)
        m.submodules.control_fifo = control_fifo = PacketFifo(
            control_beat(cfg.data_width), cfg.data_width, cfg.fifo_depth)

        wiring.connect(m, wiring.flipped(self.input), parser.input)
        wiring.connect(m, parser.data, reassembly.input)
        wiring.connect(m, parser.control, control_fifo.input)
        wiring.connect(m, control_fifo.output, wiring.flipped(self.control))
        wiring.connect(m, control_fifo.meta, wiring.flipped(self.control_meta))
        wiring.connect(m, wiring.flipped(self.command), reassembly.command)
        wiring.connect(m, wiring.flipped(self.query), reassembly.query)
        wiring.connect(m, reassembly.missing, wiring.flipped(self.missing))
        wiring.connect(m, reassembly.event, wiring.flipped(self.event))
        wiring.connect(m, reassembly.open, store.open)
        wiring.connect(m, reassembly.write, store.write)
        wiring.connect(m, reassembly.close, store.close)
        m.d.comb += [
            parser.settings.eq(self.settings), reassembly.packet_size.eq(self.packet_size),
            reassembly.status_slot.eq(self.status_slot), self.status.eq(reassembly.status),
            self.high_ack.eq(reassembly.high_ack),
            self.drops.eq(parser.drops | reassembly.drops
                          | (control_fifo.overflow << Drop.CONTROL_OVERFLOW)),
            self.accepted.eq(reassembly.accepted), self.duplicate.eq(reassembly.duplicate),
            self.events_lost.eq(reassembly.events_lost),
            self.control_queued.eq(control_fifo.committed),
        ]
        self._reader(m, store)
        return m

    def _reader(self, m: Module, store: wiring.Component) -> None:
        """The store's reader to a drain while it runs, to the downloads otherwise."""
        if not self.config.sink:
            self._read(m, store, self.download_seek, self.download)
            m.d.comb += self.download_level.eq(store.level)
            return
        m.submodules.drainer = drainer = SinkDrain(self.config)
        wiring.connect(m, wiring.flipped(self.drain), drainer.command)
        wiring.connect(m, drainer.sink, wiring.flipped(self.sink))
        m.d.comb += self.drained.eq(drainer.done)
        if self.config.check:
            m.submodules.checker = checker = PatternChecker(self.config)
            m.d.comb += [checker.start.eq(self.drain.valid & self.drain.ready), checker.buffer.eq(self.drain.payload.buffer),
                         checker.word.eq(self.sink.payload), checker.taken.eq(self.sink.valid & self.sink.ready),
                         self.mismatches.eq(checker.mismatches)]
        with m.If(drainer.busy):
            self._read(m, store, drainer.seek, drainer.words)
        with m.Else():
            self._read(m, store, self.download_seek, self.download)
        m.d.comb += self.download_level.eq(Mux(~drainer.busy, store.level, 0))

    @staticmethod
    def _read(m: Module, store: wiring.Component, seek: stream.Interface, words: stream.Interface) -> None:
        m.d.comb += [store.seek.valid.eq(seek.valid), store.seek.payload.eq(seek.payload),
                     seek.ready.eq(store.seek.ready),
                     words.valid.eq(store.read.valid), words.payload.eq(store.read.payload),
                     store.read.ready.eq(words.ready)]
