"""The NETBLT engine: registers on the host's side, IP payloads on the network's.

Board-independent: hw/node.py puts LiteEth's IPv4 layer under ``net_tx``
and ``net_rx`` and the host link on ``bus``, connects ``stamps`` (the built-in
source) to ``source``, the source port, where no user source is (docs/source-port.md),
and takes every word from ``sink``, the sink port, where no user sink is
(docs/sink-port.md).
docs/architecture.md draws it.
"""

from __future__ import annotations

from functools import partial

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .control_status import ControlStatus
from .dram_slots import dram_members
from .outbound import Outbound
from .receive_path import Receiver
from .receive_store import READ_AHEAD
from .register_bus import DramCsrBus, RegisterBus
from .sink_port import sink_word
from .source_port import StampSource, source_word
from .streams import ip_stream
from .transmit_path import UPLOAD_ROOM, Transmitter


class Engine(wiring.Component):
    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        super().__init__({
            "bus": In(RegisterBus()),
            "net_tx": Out(ip_stream(self.config.data_width)),
            "net_rx": In(ip_stream(self.config.data_width)),
            "events_waiting": Out(1),
            "control_next": Out(16),  # bytes of the next control packet waiting (0: none)
            "download_level": Out(range(READ_AHEAD + 1)),  # DOWNLOAD_DATA reads that will find a word
            "upload_room": Out(range(UPLOAD_ROOM + 1)),  # UPLOAD_DATA writes that will be taken
            # The source port (TAKE), and the built-in stamp source a top may feed it from.
            **({"source": In(stream.Signature(source_word(self.config.data_width))),
                "stamps": Out(stream.Signature(source_word(self.config.data_width)))} if self.config.take else {}),
            # The sink port (DRAIN): received buffers out, to a top's gateware.
            **({"sink": Out(stream.Signature(sink_word(self.config.data_width)))} if self.config.sink else {}),
            # With slots in DRAM, the stores' native ports, for a LiteDRAM core's two, and
            # the core's ready, which STATE shows.
            **dram_members(self.config, "tx_dram", "rx_dram"),
            **({"dram_ready": In(1)} if self.config.dram else {}),
            **({"dram_csr": Out(DramCsrBus())} if self.config.dram and self.config.dram.phy else {}),
        })

    def elaborate(self, platform) -> Module:
        cfg = self.config
        m = Module()
        m.submodules.transmitter = tx = Transmitter(cfg)
        m.submodules.receiver = rx = Receiver(cfg)
        m.submodules.control = ctl = ControlStatus(cfg)
        m.submodules.outbound = out = Outbound(cfg)

        connect = partial(wiring.connect, m)
        connect(wiring.flipped(self.bus), ctl.bus)
        connect(ctl.tx_command, tx.command)
        connect(ctl.fill, tx.fill)
        connect(ctl.take, tx.take)
        connect(ctl.upload, tx.upload)
        connect(ctl.rx_command, rx.command)
        connect(ctl.query, rx.query)
        if cfg.sink:
            connect(ctl.drain, rx.drain)
            connect(rx.sink, wiring.flipped(self.sink))
            m.d.comb += [ctl.drained.eq(rx.drained), ctl.mismatches.eq(rx.mismatches)]
        connect(ctl.download_seek, rx.download_seek)
        connect(rx.download, ctl.download)
        connect(rx.missing, ctl.missing)
        connect(rx.event, ctl.rx_event)
        connect(rx.control, ctl.control)
        connect(rx.control_meta, ctl.control_meta)
        connect(tx.out, out.data)
        connect(out.out, wiring.flipped(self.net_tx))
        connect(wiring.flipped(self.net_rx), rx.input)
        if cfg.dram:
            connect(tx.dram, wiring.flipped(self.tx_dram))
            connect(rx.dram, wiring.flipped(self.rx_dram))
        m.d.comb += ctl.slots_ready.eq(self.dram_ready if cfg.dram else 1)
        if ctl.dram_port:
            connect(ctl.dram_csr, wiring.flipped(self.dram_csr))
        if cfg.take:
            m.submodules.stamps = stamps = StampSource(cfg)
            m.d.comb += [stamps.every.eq(ctl.stamp_every), stamps.restart.eq(ctl.stamp_restart)]
            connect(stamps.source, wiring.flipped(self.stamps))
            connect(wiring.flipped(self.source), tx.source)

        data_sent = tx.out.valid & tx.out.ready & tx.out.payload.last
        m.d.comb += [
            tx.settings.eq(ctl.tx_settings), out.settings.eq(ctl.tx_settings),
            tx.pacing.eq(ctl.pacing),
            rx.settings.eq(ctl.rx_settings), rx.packet_size.eq(ctl.tx_settings.packet_size),
            out.word.eq(ctl.send_word), out.push.eq(ctl.send_push),
            out.length.eq(ctl.send_length), out.commit.eq(ctl.send_commit),
            rx.status_slot.eq(ctl.status_slot), ctl.status.eq(rx.status),
            ctl.rx_high_ack.eq(rx.high_ack), ctl.tx_idle.eq(tx.idle),
            ctl.sent.eq(tx.sent), ctl.sent_slot.eq(tx.sent_slot), ctl.filled.eq(tx.filled), ctl.took.eq(tx.took),
            ctl.source_taken.eq(tx.taken), ctl.source_refused.eq(tx.refused),
            ctl.source_early_end.eq(tx.early_end),
            ctl.tx_packet.eq(data_sent), ctl.tx_control.eq(out.sent),
            ctl.rx_accepted.eq(rx.accepted), ctl.rx_duplicate.eq(rx.duplicate),
            ctl.rx_control.eq(rx.control_queued),
            ctl.rejected.eq(tx.rejected | out.rejected),
            ctl.events_lost.eq(rx.events_lost), ctl.drops.eq(rx.drops),
            self.events_waiting.eq(ctl.events_waiting), self.control_next.eq(ctl.control_next),
            ctl.download_level.eq(rx.download_level), self.download_level.eq(rx.download_level),
            ctl.upload_room.eq(tx.upload_room), self.upload_room.eq(tx.upload_room),
        ]
        return m
