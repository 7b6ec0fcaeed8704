"""Where buffers to send live: block RAM, or DRAM behind staging lines.

Uploads and the pattern source write words at addresses (``write``: a stream, so a
store in DRAM can make them wait); the segmenter fetches a packet's run of words into
one of two runs (``fetch``) and, from the cycle that run's bit of ``fetched`` pulses,
reads it by run and index (``read``, a memory read port: the word a cycle after its
address). So one packet is sent from a run while the next is fetched into the other.
A fetch sees every write taken before it. Both stores take the same signals, so the
transmit side need not know which one it has; ``writes_wait`` says whether a write can
be made to wait, so the Transmitter queues uploads only for a store whose writes can.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Signal, Value
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .dram_slots import DramSlots, LineState, dram_port, store_slots


def store_write(config: EngineConfig) -> data.StructLayout:
    """A word and its address, in beats of the engine's width across all transmit slots."""
    return data.StructLayout({"address": config.tx_address_width, "data": config.data_width})


RUNS = 2
"""Runs a store holds at once: one read while the next is fetched."""


def store_fetch(config: EngineConfig, packet_words: int, sums: bool = False) -> data.StructLayout:
    """A run of at most ``packet_words`` words from ``address``, into ``run``; for a
    store that sums runs, ``keep``: the bytes of its last word that are the packet's,
    the only ones it sums there."""
    return data.StructLayout({"address": config.tx_address_width, "words": range(packet_words + 1),
                              "run": range(RUNS), **({"keep": config.beat_bytes} if sums else {})})


def index_bits(packet_words: int) -> int:
    """The width of a word's index in a run."""
    return (packet_words - 1).bit_length()


def run_reader(config: EngineConfig, packet_words: int) -> memory.ReadPort.Signature:
    """The memory's own read-port shape (address in, data out); the address is the
    word's index in the run, with the run above it."""
    return memory.ReadPort.Signature(addr_width=index_bits(packet_words) + 1, shape=config.data_width)


def transmit_store_signature(config: EngineConfig, packet_words: int, sums: bool = False) -> dict:
    """With ``sums``, the store sums each run as it fetches it: ``sums[run]`` holds the
    run's data checksum sum (headers.fold) from its ``fetched`` pulse on."""
    return {
        "write": In(stream.Signature(store_write(config))),
        "fetch": In(stream.Signature(store_fetch(config, packet_words, sums))),
        "fetched": Out(RUNS),
        "read": Out(run_reader(config, packet_words)),
        **({"sums": Out(data.ArrayLayout(16, RUNS))} if sums else {}),
    }


def read_address(run, index, packet_words: int) -> Value:
    """The read address of word ``index`` of ``run``."""
    return Cat(index[:index_bits(packet_words)], run)


def run_and_index(read: wiring.PureInterface, packet_words: int) -> tuple:
    """A read address's run and index."""
    bits = index_bits(packet_words)
    return read.addr[bits], read.addr[:bits]


class BlockTransmitStore(wiring.Component):
    """Slots in block RAM: writes land at once, a fetch is ready the next cycle. Runs
    are not summed: the checksum table sums the slots as they are written."""

    writes_wait = False
    sums_runs = False

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.packet_words = config.slot_words
        """The longest run the store fetches."""
        super().__init__(transmit_store_signature(config, self.packet_words))

    def elaborate(self, platform) -> Module:
        cfg = self.config
        m = Module()
        m.submodules.memory = mem = memory.Memory(shape=cfg.data_width, depth=cfg.tx_slots * cfg.slot_words, init=[])
        write, read = mem.write_port(), mem.read_port()
        start = Array(Signal.like(self.fetch.payload.address, name=f"start{i}") for i in range(RUNS))
        run, index = run_and_index(self.read, self.packet_words)
        m.d.comb += [self.write.ready.eq(1), write.addr.eq(self.write.payload.address),
                     write.data.eq(self.write.payload.data), write.en.eq(self.write.valid),
                     self.fetch.ready.eq(1),
                     read.addr.eq(start[run] + index), read.en.eq(self.read.en), self.read.data.eq(read.data)]
        m.d.sync += [self.fetched[i].eq(self.fetch.valid & (self.fetch.payload.run == i)) for i in range(RUNS)]
        with m.If(self.fetch.valid):
            m.d.sync += start[self.fetch.payload.run].eq(self.fetch.payload.address)
        return m


class DramTransmitStore(wiring.Component):
    """Slots in the lower half of the configuration's DRAM.
    Writes to consecutive addresses fill an inbound line, committed when it is full, when
    a write goes elsewhere, or when a fetch comes; two lines, so one fills while the other
    is copied. A fetch waits until every written line is committed, and writes wait while
    it does; its run is copied into the outbound line of its number and read there, and
    summed on its way (DramDma), so data checksums need no table of sums: 64 of the
    Versa's 108 EBR for 16 slots of 4096 packets."""

    writes_wait = True
    sums_runs = True

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.slots = store_slots(config, base=0)
        assert self.slots.lines >= RUNS
        self.packet_words = self.slots.longest_run
        super().__init__({**transmit_store_signature(config, self.packet_words, sums=True),
                          "dram": Out(dram_port(config))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.slots = slots = self.slots
        wiring.connect(m, slots.dram, wiring.flipped(self.dram))
        written = self._writes(m, slots)
        self._fetches(m, slots, written)
        return m

    def _writes(self, m: Module, slots: DramSlots) -> Signal:
        """Writes into lines, lines to DRAM in turn; returns 'a line holds writes not yet
        committed'."""
        L = slots.lines
        state = Array(Signal(LineState, name=f"state{i}") for i in range(L))
        start = Array(Signal.like(self.write.payload.address, name=f"start{i}") for i in range(L))
        count = Array(Signal(range(slots.line_words + 1), name=f"count{i}") for i in range(L))
        filling, copying = Signal(range(L)), Signal(range(L))

        w = self.write.payload
        is_open = state[filling] == LineState.OPEN
        continues = (is_open & (w.address == start[filling] + count[filling])
                     & (start[filling] % slots.ratio + count[filling] < slots.line_words))
        opens = state[filling] == LineState.FREE
        with m.If(is_open & (self.fetch.valid | (self.write.valid & ~continues))):
            # A fetch waits for this line's words, or the write starts a run of its own.
            m.d.sync += [state[filling].eq(LineState.WAITING), filling.eq(filling + 1)]
        with m.Elif(self.write.valid & ~self.fetch.valid & (continues | opens)):
            m.d.comb += [self.write.ready.eq(1), slots.write.data.eq(w.data), slots.write.en.eq(0b1111),
                         slots.write.addr.eq(slots.staged(filling, start[filling], count[filling]))]
            m.d.sync += count[filling].eq(count[filling] + 1)
            with m.If(opens):
                m.d.comb += slots.write.addr.eq(slots.staged(filling, w.address, 0))
                m.d.sync += [state[filling].eq(LineState.OPEN), start[filling].eq(w.address), count[filling].eq(1)]

        job = slots.commit.payload
        m.d.comb += [slots.commit.valid.eq(state[copying] == LineState.WAITING), job.line.eq(copying),
                     job.address.eq(start[copying]), job.words.eq(count[copying]), job.keep.eq(0b1111)]
        with m.If(slots.commit.valid & slots.commit.ready):
            m.d.sync += [state[copying].eq(LineState.COPYING), copying.eq(copying + 1)]
        for line in range(L):
            with m.If(slots.committed[line]):
                m.d.sync += state[line].eq(LineState.FREE)
        pending = Signal()
        m.d.comb += pending.eq(Cat(*((s == LineState.OPEN) | (s == LineState.WAITING) for s in state)).any())
        return pending

    def _fetches(self, m: Module, slots: DramSlots, written) -> None:
        """A run into its outbound line once every written word is on its way to DRAM
        (LiteDRAM serves the port in order, so the fetch reads it)."""
        start = Array(Signal.like(self.fetch.payload.address, name=f"start{i}") for i in range(RUNS))
        fetch = self.fetch.payload
        job = slots.fetch.payload
        m.d.comb += [slots.fetch.valid.eq(self.fetch.valid & ~written),
                     self.fetch.ready.eq(slots.fetch.ready & ~written),
                     job.line.eq(fetch.run), job.address.eq(fetch.address), job.words.eq(fetch.words),
                     job.keep.eq(fetch.keep)]
        with m.If(slots.fetch.valid & slots.fetch.ready):
            m.d.sync += start[fetch.run].eq(fetch.address)
        # The DMA's last word lands in the outbound line as it says done: a cycle later the
        # whole run is there to read.
        m.d.sync += self.fetched.eq(slots.fetched[:RUNS])
        m.d.comb += [self.sums[run].eq(slots.sums[run]) for run in range(RUNS)]
        run, index = run_and_index(self.read, self.packet_words)
        m.d.comb += [slots.read.addr.eq(slots.staged(run, start[run], index)), slots.read.en.eq(self.read.en),
                     self.read.data.eq(slots.read.data)]


def transmit_store(config: EngineConfig) -> BlockTransmitStore | DramTransmitStore:
    """The store the configuration asks for."""
    return BlockTransmitStore(config) if config.dram is None else DramTransmitStore(config)
