"""A slot store's DRAM, seen by the engine through block-RAM staging lines.

The engine moves a word a cycle and jumps between packets; DRAM wants long runs and
answers late. So the engine never touches DRAM: it writes a run (a packet, an upload's
stretch) into an inbound line and commits it, or fetches a run into an outbound line and
reads it there when the fetch is done. Runs are counted in engine words at any engine
word of DRAM: a line keeps its run at the same place within a DRAM word as in DRAM
(the run's *phase*), and the copy masks the bytes at its ends, so a run shares its
first and last DRAM words with its neighbours without touching them.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, enum, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .dram_dma import DramDma, NativePort

STORE_LINES = 2
"""Lines each way a store stages through: one is filled (or read) while the other is copied."""
QUEUED_COPIES = 2
"""Copies taken ahead of the DMA: a commit and the fetch behind it are both taken at
once, so a store's writes, which wait while a fetch waits, are held a cycle or two, not
through the DMA's copy in progress and the commit's (a Colorlight receiving at the
wire's rate downloaded at 606 Mb/s that way, 771 with the queue)."""


def run_layout(lines: int, line_words: int, address_bits: int) -> data.StructLayout:
    """A run of ``words`` engine words at engine word ``address`` of the store's region,
    in ``line``; ``keep`` is the byte mask of its last word: the bytes a commit writes,
    the bytes a fetch sums."""
    return data.StructLayout({"line": range(lines), "address": address_bits,
                              "words": range(line_words + 1), "keep": 4})


class LineState(enum.Enum, shape=2):
    """Where a store's inbound line is: the stores track theirs with these."""

    FREE = 0
    OPEN = 1
    WAITING = 2  # committed; its copy not yet taken
    COPYING = 3


class DramSlots(wiring.Component):
    """``lines`` inbound and ``lines`` outbound staging lines of ``line_words`` engine
    words, and one DMA serving both a run at a time, in the order the runs are taken
    (``QUEUED_COPIES`` wait ahead of it): a fetch taken after a commit reads what the
    commit wrote (LiteDRAM serves a port's commands in order). ``committed`` and
    ``fetched`` pulse a line's bit when its run is done: an inbound line may then be
    written again, an outbound line read. From the cycle after, ``sums`` holds the
    fetched run's bytes summed (DramDma's ``read_sum``: under the fetch's ``keep``, the
    bytes of its last word), until the line's next fetch is done.

    The store owns ``region_words`` engine words of DRAM from DRAM word ``base``; a run's
    address is taken inside that region, and the stores keep each run inside a slot. A
    line holds a run of ``words`` only if its phase plus ``words`` fits the line."""

    ENGINE_BITS = 32
    LANE_BYTES = ENGINE_BITS // 8

    def __init__(self, port: NativePort, *, lines: int, line_words: int, base: int, region_words: int) -> None:
        self.port = port
        self.ratio = port.data_bits // self.ENGINE_BITS
        """Engine words per DRAM word."""
        for what, n in (("line words", line_words), ("region words", region_words)):
            if n & (n - 1) or n < self.ratio:
                raise ValueError(f"{what} must be a power of two and at least a DRAM word: {n}")
        self.lines, self.line_words, self.base, self.region_words = lines, line_words, base, region_words
        engine_bits = (lines * line_words - 1).bit_length()
        job = run_layout(lines, line_words, (region_words - 1).bit_length())
        super().__init__({
            "dram": Out(port),
            "commit": In(stream.Signature(job)),
            "fetch": In(stream.Signature(job)),
            "committed": Out(lines),
            "fetched": Out(lines),
            "sums": Out(data.ArrayLayout(16, lines)),
            # The staging memories' own port shapes (addresses in, read data out) at the
            # engine's width: the engine writes inbound lines and reads outbound ones,
            # addressed line x line_words + word.
            "write": Out(memory.WritePort.Signature(addr_width=engine_bits, shape=self.ENGINE_BITS, granularity=8)),
            "read": Out(memory.ReadPort.Signature(addr_width=engine_bits, shape=self.ENGINE_BITS)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        r, lane_bits = self.ratio, (self.ratio - 1).bit_length()
        line_dram_words = self.line_words // r
        depth = self.lines * line_dram_words
        m.submodules.dma = dma = DramDma(self.port, depth, length_bits=line_dram_words.bit_length())
        wiring.connect(m, dma.dram, wiring.flipped(self.dram))
        m.submodules.inbound = inbound = memory.Memory(shape=self.port.data_bits, depth=depth, init=[])
        m.submodules.outbound = outbound = memory.Memory(shape=self.port.data_bits, depth=depth, init=[])
        self._engine_ports(m, inbound.write_port(granularity=8), outbound.read_port(), lane_bits)
        dma_read, dma_write = inbound.read_port(), outbound.write_port()
        for inside, outside in ((dma_read, dma.staging_read), (dma_write, dma.staging_write)):
            m.d.comb += [inside.addr.eq(outside.addr), inside.en.eq(outside.en)]
        m.d.comb += [dma.staging_read.data.eq(dma_read.data), dma_write.data.eq(dma.staging_write.data)]

        # Runs to copies, commits and fetches taking turns, queued for the DMA.
        turn = Signal()  # 1: a waiting fetch goes before a waiting commit
        take_fetch = self.fetch.valid & (~self.commit.valid | turn)
        job = Signal.like(self.commit.payload)
        m.d.comb += job.eq(Mux(take_fetch, self.fetch.payload, self.commit.payload))
        phase = job.address[:lane_bits]
        end_lane = (phase + job.words - 1)[:lane_bits]
        lane_bytes = self.LANE_BYTES
        copy = Signal.like(dma.copy.payload)
        m.submodules.copies = copies = fifo.SyncFIFO(width=copy.shape().size, depth=QUEUED_COPIES)
        m.d.comb += [
            copy.to_dram.eq(~take_fetch), copy.staging.eq(job.line * line_dram_words),
            copy.dram.eq(self.base + (job.address >> lane_bits)),
            copy.words.eq((phase + job.words + r - 1) >> lane_bits),
            copy.first_mask.eq(~((1 << (phase * lane_bytes)) - 1)),
            copy.last_mask.eq(((1 << (end_lane * lane_bytes)) - 1) | (job.keep << (end_lane * lane_bytes))),
            copies.w_data.eq(copy), copies.w_en.eq(self.fetch.valid | self.commit.valid),
            self.fetch.ready.eq(copies.w_rdy & take_fetch),
            self.commit.ready.eq(copies.w_rdy & ~take_fetch),
            dma.copy.payload.eq(copies.r_data), dma.copy.valid.eq(copies.r_rdy), copies.r_en.eq(dma.copy.ready),
        ]
        with m.If(copies.w_en & copies.w_rdy):
            m.d.sync += turn.eq(~take_fetch)
        # The copy the DMA runs: its direction and line, from its own fields.
        running_fetch, running_line = Signal(), Signal(range(self.lines))
        with m.If(dma.copy.valid & dma.copy.ready):
            m.d.sync += [running_fetch.eq(~dma.copy.payload.to_dram),
                         running_line.eq(dma.copy.payload.staging >> (line_dram_words.bit_length() - 1))]
        with m.If(dma.done):
            m.d.comb += [self.fetched.eq(running_fetch << running_line),
                         self.committed.eq(~running_fetch << running_line)]
            with m.If(running_fetch):
                m.d.sync += self.sums[running_line].eq(dma.read_sum)
        return m

    @property
    def longest_run(self) -> int:
        """The longest run a line holds at any phase."""
        return self.line_words - (self.ratio - 1)

    def staged(self, line, address, index):
        """Where word ``index`` of a run at engine word ``address`` lies in ``line``: at
        the run's place within a DRAM word, as the copy expects it."""
        return line * self.line_words + address % self.ratio + index

    def _engine_ports(self, m: Module, write, read, lane_bits: int) -> None:
        """Engine words to and from DRAM-wide staging: a write goes to its lane's bytes,
        a read picks its lane from the word a cycle later."""
        lane = self.write.addr[:lane_bits]
        m.d.comb += [write.addr.eq(self.write.addr >> lane_bits),
                     write.data.eq(Cat(*([self.write.data] * self.ratio))),
                     write.en.eq(self.write.en << (lane * self.LANE_BYTES))]
        read_lane = Signal(lane_bits)
        with m.If(self.read.en):
            m.d.sync += read_lane.eq(self.read.addr[:lane_bits])
        m.d.comb += [read.addr.eq(self.read.addr >> lane_bits), read.en.eq(self.read.en),
                     self.read.data.eq(read.data.word_select(read_lane, self.ENGINE_BITS))]


def dram_port(config: EngineConfig) -> NativePort:
    """The native port each of the configuration's stores takes."""
    return NativePort(config.dram.address_bits, config.dram.data_bits)


def dram_members(config: EngineConfig, *names: str) -> dict:
    """Signature members ``names``, each a store's native port, where the configuration
    puts the slots in DRAM; none where they are in block RAM."""
    return {name: Out(dram_port(config)) for name in names} if config.dram else {}


def store_slots(config: EngineConfig, base: int) -> DramSlots:
    """The staging of a store whose slots take half the configuration's DRAM from DRAM
    word ``base`` (EngineConfig checks that they fit)."""
    dram = config.dram
    return DramSlots(dram_port(config), lines=STORE_LINES, line_words=dram.line_words, base=base,
                     region_words=dram.half_words)
