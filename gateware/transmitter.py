"""The transmit side assembled: slot memory, pattern source, pacer and segmenter."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .checksum_table import ChecksumTable
from .config import EngineConfig
from .pacer import Pacer
from .pattern import PATTERN_COMMAND, PatternSource
from .segmenter import TX_COMMAND, TX_SETTINGS, Segmenter
from .streams import ip_stream

PACING = data.StructLayout({"mode": 2, "burst_size": 16, "interval": 32})


class Transmitter(wiring.Component):
    """Buffers in block RAM, sent as paced DATA/LDATA packets.

    The slot memory has one write port, shared by the pattern source (while it fills;
    where the configuration has one) and the host's upload port, and one read port, the
    segmenter's. The checksum table watches the write port, so data checksums cost no
    second read of a packet.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        super().__init__({
            "settings": In(TX_SETTINGS),
            "pacing": In(PACING),
            "command": In(stream.Signature(TX_COMMAND)),
            "fill": In(stream.Signature(PATTERN_COMMAND)),
            # The memory's own write-port shape: its members are inputs here too.
            "upload": Out(memory.WritePort.Signature(addr_width=config.tx_address_width,
                                                     shape=config.data_width)),
            "out": Out(ip_stream(config.data_width)),
            "sent": Out(1),
            "sent_slot": Out(4),
            "rejected": Out(1),
            "filled": Out(1),
            "idle": Out(1),
        })

    def elaborate(self, platform) -> Module:
        cfg = self.config
        m = Module()
        m.submodules.memory = mem = memory.Memory(
            shape=cfg.data_width, depth=cfg.tx_slots * cfg.slot_words, init=[])
        write = mem.write_port()
        read = mem.read_port()
        m.submodules.pacer = pacer = Pacer()
        m.submodules.segmenter = segmenter = Segmenter(cfg)
        m.submodules.checksums = checksums = ChecksumTable(cfg)

        m.d.comb += [
            pacer.mode.eq(self.pacing.mode), pacer.burst_size.eq(self.pacing.burst_size),
            pacer.interval.eq(self.pacing.interval),
            segmenter.grant.eq(pacer.grant), pacer.take.eq(segmenter.take),
            segmenter.settings.eq(self.settings),
            read.addr.eq(segmenter.memory.addr), segmenter.memory.data.eq(read.data),
            self.sent.eq(segmenter.sent), self.sent_slot.eq(segmenter.sent_slot),
            self.rejected.eq(segmenter.rejected), self.idle.eq(segmenter.idle),
        ]
        wiring.connect(m, wiring.flipped(self.command), segmenter.command)
        wiring.connect(m, segmenter.out, wiring.flipped(self.out))
        wiring.connect(m, segmenter.checksums, checksums.lookup)
        m.d.comb += [checksums.packet_size.eq(self.settings.packet_size), checksums.write.addr.eq(write.addr),
                     checksums.write.data.eq(write.data), checksums.write.en.eq(write.en)]
        m.d.comb += [write.addr.eq(self.upload.addr), write.data.eq(self.upload.data), write.en.eq(self.upload.en)]
        if cfg.pattern:
            m.submodules.source = source = PatternSource(cfg)
            wiring.connect(m, wiring.flipped(self.fill), source.command)
            m.d.comb += self.filled.eq(source.done)
            with m.If(source.busy):  # the port is the pattern source's while it fills
                m.d.comb += [write.addr.eq(source.memory.addr), write.data.eq(source.memory.data),
                             write.en.eq(source.memory.en)]
        return m
