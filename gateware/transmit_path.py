"""The transmit side assembled: transmit store, pattern source, source port, pacer and segmenter."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .checksum_table import ChecksumTable
from .config import EngineConfig
from .dram_slots import dram_members
from .pacer import Pacer
from .pattern import PATTERN_COMMAND, PatternSource
from .source_port import SourceTaker, source_word
from .segmenter import TX_COMMAND, TX_SETTINGS, Segmenter
from .streams import ip_stream
from .transmit_store import store_write, transmit_store

PACING = data.StructLayout({"mode": 2, "burst_size": 16, "interval": 32})

UPLOAD_ROOM = 16
"""Uploads the transmit side takes at most without the host waiting: a queue's worth
in front of a store whose writes wait (DRAM), and always that many for block RAM."""


class Transmitter(wiring.Component):
    """Buffers in the transmit store, sent as paced DATA/LDATA packets.

    The store is where the configuration puts the slots: block RAM, or DRAM through
    ``dram``, the caller's to connect. Its writes are the pattern source's while it
    fills, else the source port's while it takes (where the configuration has them),
    else the host's uploads; a fill or take starts once the uploads before it are
    written, and a packet of the slot it writes is fetched once it ends, so the host
    queues a FILL or TAKE and its slot's SEND together. ``upload_room``
    says how many uploads it takes now, and one beyond that is lost and counted in
    ``rejected``. A packet's run is fetched only once every upload taken before it is
    written. Data checksums cost no second read: a store in DRAM sums each packet's run
    as it fetches it, and in block RAM the checksum table watches the writes.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.store = transmit_store(config)
        super().__init__({
            "settings": In(TX_SETTINGS),
            "pacing": In(PACING),
            "command": In(stream.Signature(TX_COMMAND)),
            "fill": In(stream.Signature(PATTERN_COMMAND)),
            "take": In(stream.Signature(PATTERN_COMMAND)),
            "source": In(stream.Signature(source_word(config.data_width))),
            # A memory write port's shape: its members are inputs here too.
            "upload": Out(memory.WritePort.Signature(addr_width=config.tx_address_width,
                                                     shape=config.data_width)),
            "upload_room": Out(range(UPLOAD_ROOM + 1)),
            "out": Out(ip_stream(config.data_width)),
            "sent": Out(1),
            "sent_slot": Out(4),
            "rejected": Out(1),
            "filled": Out(1),
            "took": Out(1),
            # The source port's counter strobes: words taken, refused, marked last early.
            "taken": Out(1), "refused": Out(1), "early_end": Out(1),
            "idle": Out(1),
            **dram_members(config, "dram"),
        })

    def elaborate(self, platform) -> Module:
        cfg = self.config
        m = Module()
        m.submodules.store = store = self.store
        if cfg.dram:
            wiring.connect(m, store.dram, wiring.flipped(self.dram))
        m.submodules.pacer = pacer = Pacer()
        m.submodules.segmenter = segmenter = Segmenter(cfg, store.packet_words, store.sums_runs)
        if not store.sums_runs:
            m.submodules.checksums = checksums = ChecksumTable(cfg)

        m.d.comb += [
            pacer.mode.eq(self.pacing.mode), pacer.burst_size.eq(self.pacing.burst_size),
            pacer.interval.eq(self.pacing.interval),
            segmenter.grant.eq(pacer.grant), pacer.take.eq(segmenter.take),
            segmenter.settings.eq(self.settings),
            self.sent.eq(segmenter.sent), self.sent_slot.eq(segmenter.sent_slot),
            self.idle.eq(segmenter.idle),
        ]
        wiring.connect(m, wiring.flipped(self.command), segmenter.command)
        wiring.connect(m, segmenter.out, wiring.flipped(self.out))
        if store.sums_runs:
            m.d.comb += segmenter.sums.eq(store.sums)
        else:
            wiring.connect(m, segmenter.checksums, checksums.lookup)
        wiring.connect(m, segmenter.read, store.read)

        uploads, queued, lost = self._uploads(m, segmenter.fetch)
        writers, filling = [], Const(0)
        if cfg.fill:
            m.submodules.pattern = pattern = PatternSource(cfg)
            m.d.comb += self.filled.eq(pattern.done)
            writers.append(pattern)
            filling |= self._writing_slot(m, pattern, self.fill, uploads, segmenter.fetch)
        if cfg.take:
            m.submodules.taker = taker = SourceTaker(cfg)
            wiring.connect(m, wiring.flipped(self.source), taker.source)
            m.d.comb += [self.took.eq(taker.done), self.taken.eq(taker.taken), self.refused.eq(taker.refused),
                         self.early_end.eq(taker.early_end)]
            writers.append(taker)
            filling |= self._writing_slot(m, taker, self.take, uploads, segmenter.fetch)
        write, free = store.write, Const(1)
        for writer in writers:  # the first one busy has the store's writes; the uploads, when none is
            with m.If(free & writer.busy):
                m.d.comb += [write.valid.eq(writer.write.valid), write.payload.eq(writer.write.payload),
                             writer.write.ready.eq(write.ready)]
            free &= ~writer.busy
        with m.If(free):
            m.d.comb += [write.valid.eq(uploads.valid), write.payload.eq(uploads.payload),
                         uploads.ready.eq(write.ready)]
        if not store.sums_runs:
            m.d.comb += [checksums.packet_size.eq(self.settings.packet_size),
                         checksums.write.addr.eq(write.payload.address), checksums.write.data.eq(write.payload.data),
                         checksums.write.en.eq(write.valid & write.ready)]

        # A fetch sees every write taken before it: uploads queued when it came go first.
        m.d.comb += [store.fetch.payload.eq(segmenter.fetch.payload),
                     store.fetch.valid.eq(segmenter.fetch.valid & ~queued & ~filling),
                     segmenter.fetch.ready.eq(store.fetch.ready & ~queued & ~filling),
                     segmenter.fetched.eq(store.fetched),
                     self.rejected.eq(segmenter.rejected | lost)]
        return m

    def _writing_slot(self, m: Module, writer: PatternSource | SourceTaker, command: stream.Interface,
                      uploads: stream.Interface, fetch: stream.Interface) -> Signal:
        """Start ``writer`` on ``command`` once the uploads taken before it are written
        (else an upload's last queued words, in DRAM, would land over what it writes);
        the result: 'the waiting ``fetch`` is from the slot it is writing', so a SEND
        right behind a FILL or TAKE of its slot, both queued at once by the host, sends
        what they wrote, not what the slot held before."""
        m.d.comb += [writer.command.payload.eq(command.payload),
                     writer.command.valid.eq(command.valid & ~uploads.valid),
                     command.ready.eq(writer.command.ready & ~uploads.valid)]
        slot, writing = Signal(4), Signal()
        with m.If(command.valid & command.ready):
            m.d.sync += slot.eq(command.payload.slot)
        fetch_slot = fetch.payload.address >> (self.config.slot_words - 1).bit_length()
        m.d.comb += writing.eq(writer.busy & (fetch_slot == slot))
        return writing

    def _uploads(self, m: Module, fetch: stream.Interface) -> tuple[stream.Interface, Signal, Signal]:
        """The host's uploads as a stream of writes, through a queue when the store's
        writes wait. Returns it, 'uploads taken before the waiting ``fetch`` came still
        wait in the queue' and 'an upload is lost'. Only those: a steady stream of uploads
        behind them would otherwise hold a fetch off until it ends."""
        uploads = stream.Signature(store_write(self.config)).create()
        word = Cat(self.upload.addr, self.upload.data)
        queued, lost = Signal(), Signal()
        if self.store.writes_wait:
            m.submodules.upload_queue = queue = fifo.SyncFIFOBuffered(width=len(word), depth=UPLOAD_ROOM)
            m.d.comb += [queue.w_data.eq(word), queue.w_en.eq(self.upload.en),
                         lost.eq(self.upload.en & ~queue.w_rdy),
                         uploads.valid.eq(queue.r_rdy), uploads.payload.eq(queue.r_data),
                         queue.r_en.eq(uploads.ready), self.upload_room.eq(UPLOAD_ROOM - queue.level)]
            # How many of the queued uploads the waiting fetch must see written: the
            # queue's level when it came, less those written since.
            ahead, counted = Signal(range(UPLOAD_ROOM + 1)), Signal()
            leaving = queue.r_en & queue.r_rdy
            with m.If(~fetch.valid | fetch.ready):  # none waiting, or this one taken
                m.d.sync += counted.eq(0)
            with m.Elif(~counted):
                m.d.sync += [ahead.eq(queue.level - leaving), counted.eq(1)]
            with m.Elif(leaving & (ahead != 0)):
                m.d.sync += ahead.eq(ahead - 1)
            m.d.comb += queued.eq(Mux(counted, ahead != 0, queue.level != 0))
        else:
            m.d.comb += [uploads.valid.eq(self.upload.en), uploads.payload.eq(word),
                         lost.eq(self.upload.en & ~uploads.ready), self.upload_room.eq(UPLOAD_ROOM)]
        return uploads, queued, lost
