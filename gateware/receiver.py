"""The receive side assembled: parser, reassembly, slot memory, control FIFO, checker."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .drops import Drop
from .packet_fifo import CONTROL_META, PacketFifo
from .parser import RX_SETTINGS, Parser, control_beat
from .pattern import PATTERN_COMMAND, PatternChecker
from .reassembly import MISSING, MISSING_QUERY, RX_COMMAND, RX_EVENT, SLOT_STATUS, Reassembly
from .streams import ip_stream


class Receiver(wiring.Component):
    """IP payloads in; buffers in block RAM, control packets and events out.

    The slot memory's one read port serves the pattern checker while it runs (where the
    configuration has one) and the host's download port otherwise.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        super().__init__({
            "settings": In(RX_SETTINGS),
            "packet_size": In(16),  # data bytes per packet, whole beats (control.py rounds it)
            "input": In(ip_stream(config.data_width)),
            "command": In(stream.Signature(RX_COMMAND)),
            "query": In(stream.Signature(MISSING_QUERY)),
            "missing": Out(stream.Signature(MISSING)),
            "event": Out(stream.Signature(RX_EVENT)),
            "check": In(stream.Signature(PATTERN_COMMAND)),
            "checked": Out(1),
            "mismatches": Out(32),
            "control": Out(stream.Signature(config.data_width)),
            "control_meta": Out(stream.Signature(CONTROL_META)),
            # The memory's own read-port shape: address in, data out.
            "download": Out(memory.ReadPort.Signature(addr_width=config.rx_address_width, shape=config.data_width)),
            "status_slot": In(4),
            "status": Out(SLOT_STATUS),
            "high_ack": Out(16),
            "drops": Out(len(Drop)),
            "accepted": Out(1),
            "duplicate": Out(1),
            "events_lost": Out(1),
            "control_queued": Out(1),
        })

    def elaborate(self, platform) -> Module:
        cfg = self.config
        m = Module()
        m.submodules.memory = mem = memory.Memory(
            shape=cfg.data_width, depth=cfg.rx_slots * cfg.slot_words, init=[])
        write = mem.write_port(granularity=8)
        read = mem.read_port()
        m.submodules.parser = parser = Parser(cfg)
        m.submodules.reassembly = reassembly = Reassembly(cfg)
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
        m.d.comb += [
            parser.settings.eq(self.settings), reassembly.packet_size.eq(self.packet_size),
            write.addr.eq(reassembly.memory.addr), write.data.eq(reassembly.memory.data),
            write.en.eq(reassembly.memory.en),
            reassembly.status_slot.eq(self.status_slot), self.status.eq(reassembly.status),
            self.high_ack.eq(reassembly.high_ack),
            self.drops.eq(parser.drops | reassembly.drops
                          | (control_fifo.overflow << Drop.CONTROL_OVERFLOW)),
            self.accepted.eq(reassembly.accepted), self.duplicate.eq(reassembly.duplicate),
            self.events_lost.eq(reassembly.events_lost),
            self.control_queued.eq(control_fifo.committed),
            self.download.data.eq(read.data),
        ]
        m.d.comb += read.addr.eq(self.download.addr)
        if cfg.pattern:
            m.submodules.checker = checker = PatternChecker(cfg)
            wiring.connect(m, wiring.flipped(self.check), checker.command)
            m.d.comb += [self.checked.eq(checker.done), self.mismatches.eq(checker.mismatches),
                         checker.memory.data.eq(read.data)]
            with m.If(checker.busy):  # the port is the checker's while it runs
                m.d.comb += read.addr.eq(checker.memory.addr)
        return m
