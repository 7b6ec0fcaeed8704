"""Where received buffers live: block RAM, or DRAM behind staging lines.

Reassembly writes a packet between ``open`` (its first word's address; waits for room)
and ``close`` (commit it, or drop it: its checks failed at the last beat). Downloads
and the pattern checker read a run of words in order from a ``seek``; ``level`` says
how many are ready, so a reader with latency (the register bus) knows how many it may
ask for. Both stores take the same signals, so the receive side need not know which
one it has.

In DRAM a packet is staged in a line and copied when it commits; a dropped packet never
reaches DRAM. Reads fetch lines ahead of the reader, and a read that follows a commit
sees it: no fetch is offered while a committed packet waits for the DMA.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .dram_slots import DramSlots, LineState, dram_port, store_slots

READ_AHEAD = 4
"""Words the reader keeps ready, so a consumer taking a word a cycle never waits."""


def store_signature(config: EngineConfig) -> dict:
    """Addresses count beats of the engine's width across all receive slots."""
    words, width = config.rx_address_width, config.data_width
    return {
        "open": In(stream.Signature(words)),
        # The memory's own write-port shape: its members are inputs here.
        "write": Out(memory.WritePort.Signature(addr_width=words, shape=width, granularity=8)),
        # Always taken (ready is high): 1 commits the packet.
        "close": In(stream.Signature(1)),
        "seek": In(stream.Signature(words)),  # always taken
        "read": Out(stream.Signature(width)),
        "level": Out(range(READ_AHEAD + 1)),  # words ``read`` offers without waiting
    }


class _Queue(wiring.Component):
    """A first-in first-out queue of ``depth`` words in flip-flops, with SyncFIFO's ports:
    a few words need no distributed RAM, which the Colorlight's Ethernet crossing needs
    placed close to its logic."""

    def __init__(self, width: int, depth: int) -> None:
        self.depth = depth
        super().__init__({"w_data": In(width), "w_en": In(1), "r_data": Out(width), "r_en": In(1),
                          "r_rdy": Out(1), "level": Out(range(depth + 1))})

    def elaborate(self, platform) -> Module:
        m = Module()
        words = Array(Signal.like(self.w_data, name=f"word{i}") for i in range(self.depth))
        head, tail = Signal(range(self.depth)), Signal(range(self.depth))
        pop = self.r_en & self.r_rdy
        push = self.w_en & ((self.level != self.depth) | pop)
        m.d.comb += [self.r_data.eq(words[head]), self.r_rdy.eq(self.level != 0)]
        with m.If(push):
            m.d.sync += [words[tail].eq(self.w_data), tail.eq(Mux(tail == self.depth - 1, 0, tail + 1))]
        with m.If(pop):
            m.d.sync += head.eq(Mux(head == self.depth - 1, 0, head + 1))
        m.d.sync += self.level.eq(self.level + push - pop)
        return m


class _Reader:
    """Words from a memory read port (one cycle of latency) into a queue, as a stream;
    ``flush`` empties the queue, and none is offered while ``hold`` is high."""

    def __init__(self, m: Module, port, output: stream.Interface, flush, hold) -> None:
        self.m, self.port = m, port
        m.submodules.queue = self.queue = ResetInserter(flush)(_Queue(len(output.payload), READ_AHEAD))
        self.in_flight = Signal()
        m.d.comb += [output.payload.eq(self.queue.r_data), output.valid.eq(self.queue.r_rdy & ~hold),
                     self.queue.r_en.eq(output.ready & ~hold),
                     self.queue.w_data.eq(port.data), self.queue.w_en.eq(self.in_flight)]
        self.room = self.queue.level + self.in_flight < READ_AHEAD
        self.level = Mux(hold, 0, self.queue.level)

    def read(self, address, when) -> None:
        """Reads ``address`` this cycle if ``when`` (callers check ``room``)."""
        self.m.d.comb += self.port.addr.eq(address)
        self.m.d.sync += self.in_flight.eq(when)


class BlockReceiveStore(wiring.Component):
    """Slots in block RAM: a packet is written in place as it arrives (a dropped one's
    words are rewritten by the next packet for that place)."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.packet_words = config.slot_words
        """The longest packet, in engine words, the store takes whole at any address."""
        super().__init__(store_signature(config))

    def elaborate(self, platform) -> Module:
        cfg = self.config
        m = Module()
        m.submodules.memory = mem = memory.Memory(shape=cfg.data_width, depth=cfg.rx_slots * cfg.slot_words, init=[])
        write, port = mem.write_port(granularity=8), mem.read_port()
        m.d.comb += [write.addr.eq(self.write.addr), write.data.eq(self.write.data), write.en.eq(self.write.en),
                     self.open.ready.eq(1), self.close.ready.eq(1), self.seek.ready.eq(1)]
        reader = _Reader(m, port, self.read, flush=self.seek.valid, hold=self.seek.valid)
        m.d.comb += self.level.eq(reader.level)
        address = Signal.like(self.seek.payload)
        with m.If(self.seek.valid):
            m.d.sync += address.eq(self.seek.payload)
        with m.Elif(reader.room):
            m.d.sync += address.eq(address + 1)
        reader.read(address, ~self.seek.valid & reader.room)
        return m


class DramReceiveStore(wiring.Component):
    """Slots in the upper half of the configuration's DRAM (so an address gone wrong does
    not land on the transmit slots' data); two packet lines, so one fills while the
    other is copied, and two read lines."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.slots = store_slots(config, base=config.dram.receive_base)
        self.packet_words = self.slots.longest_run
        super().__init__({**store_signature(config), "dram": Out(dram_port(config))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.slots = slots = self.slots
        wiring.connect(m, slots.dram, wiring.flipped(self.dram))
        m.d.comb += [self.close.ready.eq(1), self.seek.ready.eq(1)]
        waiting = self._packets(m, slots)
        self._reads(m, slots, waiting)
        return m

    def _packets(self, m: Module, slots: DramSlots) -> Signal:
        """Packets into lines, committed lines to DRAM, in turn; returns 'a commit waits'."""
        L, r = slots.lines, slots.ratio
        state = Array(Signal(LineState, name=f"state{i}") for i in range(L))
        start = Array(Signal.like(self.open.payload, name=f"start{i}") for i in range(L))
        words = Array(Signal(range(slots.line_words + 1), name=f"words{i}") for i in range(L))
        keep = Array(Signal(4, name=f"keep{i}") for i in range(L))
        filling, copying = Signal(range(L)), Signal(range(L))

        free = state[filling] == LineState.FREE
        m.d.comb += self.open.ready.eq(free)
        with m.If(self.open.valid & free):
            m.d.sync += [state[filling].eq(LineState.OPEN), start[filling].eq(self.open.payload),
                         words[filling].eq(0), keep[filling].eq(0)]

        # Writes land at their place in the line; none past its end (reassembly refuses
        # packets longer than ``packet_words``: were one let through, it would be cut here,
        # never spilled).
        offset = Signal.like(self.write.addr)
        m.d.comb += offset.eq(self.write.addr - start[filling])
        inside = (state[filling] == LineState.OPEN) & (start[filling] % r + offset < slots.line_words)
        m.d.comb += [slots.write.addr.eq(slots.staged(filling, start[filling], offset)),
                     slots.write.data.eq(self.write.data),
                     slots.write.en.eq(self.write.en & inside.replicate(4))]
        with m.If(inside & self.write.en.any()):
            m.d.sync += [words[filling].eq(offset + 1), keep[filling].eq(self.write.en)]

        with m.If(self.close.valid & (state[filling] == LineState.OPEN)):
            with m.If(self.close.payload):
                m.d.sync += [state[filling].eq(LineState.WAITING), filling.eq(filling + 1)]
            with m.Else():
                m.d.sync += state[filling].eq(LineState.FREE)

        job = slots.commit.payload
        m.d.comb += [slots.commit.valid.eq(state[copying] == LineState.WAITING), job.line.eq(copying),
                     job.address.eq(start[copying]), job.words.eq(words[copying]), job.keep.eq(keep[copying])]
        with m.If(slots.commit.valid & slots.commit.ready):
            m.d.sync += [state[copying].eq(LineState.COPYING), copying.eq(copying + 1)]
        for line in range(L):
            with m.If(slots.committed[line]):
                m.d.sync += state[line].eq(LineState.FREE)
        return Cat(*(s == LineState.WAITING for s in state)).any()

    def _reads(self, m: Module, slots: DramSlots, commit_waiting) -> None:
        """Lines fetched in turn from the seek on, each read out in order, then fetched again."""
        L, r = slots.lines, slots.ratio
        fetching = Array(Signal(name=f"fetching{i}") for i in range(L))
        ready = Array(Signal(name=f"ready{i}") for i in range(L))
        phase = Array(Signal(range(r), name=f"phase{i}") for i in range(L))
        count = Array(Signal(range(slots.line_words + 1), name=f"count{i}") for i in range(L))
        active, pending = Signal(), Signal()
        seek_to, next_fetch = Signal.like(self.seek.payload), Signal.like(self.seek.payload)
        fetch_line, read_line, index = Signal(range(L)), Signal(range(L)), Signal(range(slots.line_words))

        # A seek waits for fetches under way (their lines are then dropped) and the word in
        # flight; until then the words queued for the old seek are held back, then dropped.
        with m.If(self.seek.valid):
            m.d.sync += [pending.eq(1), seek_to.eq(self.seek.payload), active.eq(0)]
        flush = Signal()
        reader = _Reader(m, slots.read, self.read, flush, hold=pending | self.seek.valid)
        m.d.comb += self.level.eq(reader.level)
        with m.If(pending & ~self.seek.valid & ~Cat(*fetching).any() & ~reader.in_flight):
            m.d.comb += flush.eq(1)
            m.d.sync += [pending.eq(0), active.eq(1), next_fetch.eq(seek_to), fetch_line.eq(0), read_line.eq(0),
                         index.eq(0)] + [ready[i].eq(0) for i in range(L)]

        idle_line = ~fetching[fetch_line] & ~ready[fetch_line]
        first = next_fetch % r
        job = slots.fetch.payload
        m.d.comb += [slots.fetch.valid.eq(active & idle_line & ~commit_waiting), job.line.eq(fetch_line),
                     job.address.eq(next_fetch), job.words.eq(slots.line_words - first)]
        with m.If(slots.fetch.valid & slots.fetch.ready):
            m.d.sync += [fetching[fetch_line].eq(1), phase[fetch_line].eq(first),
                         count[fetch_line].eq(slots.line_words - first),
                         next_fetch.eq(next_fetch + slots.line_words - first), fetch_line.eq(fetch_line + 1)]
        for line in range(L):
            with m.If(slots.fetched[line]):
                m.d.sync += [fetching[line].eq(0), ready[line].eq(active)]

        go = active & ready[read_line] & reader.room
        reader.read(slots.staged(read_line, phase[read_line], index), go)
        with m.If(go):
            m.d.sync += index.eq(index + 1)
            with m.If(index + 1 == count[read_line]):
                m.d.sync += [index.eq(0), ready[read_line].eq(0), read_line.eq(read_line + 1)]


def receive_store(config: EngineConfig) -> BlockReceiveStore | DramReceiveStore:
    """The store the configuration asks for."""
    return BlockReceiveStore(config) if config.dram is None else DramReceiveStore(config)
