"""A FIFO of whole packets: a packet that is bad or does not fit is rolled back.

Control packets reach the host through this: the parser judges a packet only on its
last beat, so the write pointer is committed only then, and the host sees a packet's
metadata (length, sender) only once all of it is readable. A beat that keeps no byte
(a short frame's last beat, all Ethernet padding) stores nothing and only ends the packet.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

CONTROL_META = data.StructLayout({"length": 16, "address": 32, "port": 16})


class PacketFifo(wiring.Component):
    """``depth`` beats of packet data; up to ``packets`` packets waiting."""

    def __init__(self, beat: data.StructLayout, width: int, depth: int, packets: int = 16) -> None:
        if depth & (depth - 1):
            raise ValueError("packet FIFO depth must be a power of two")
        self._depth, self._packets, self._width = depth, packets, width
        super().__init__({
            "input": In(stream.Signature(beat, always_ready=True)),
            "meta": Out(stream.Signature(CONTROL_META)),
            "output": Out(stream.Signature(width)),
            "overflow": Out(1),
            "committed": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        depth = self._depth
        m.submodules.memory = mem = memory.Memory(shape=self._width, depth=depth, init=[])
        write = mem.write_port()
        read = mem.read_port(transparent_for=(write,))
        m.submodules.metas = metas = fifo.SyncFIFOBuffered(width=CONTROL_META.size, depth=self._packets)

        bits = depth.bit_length()
        """Pointers count to twice the depth, so full and empty differ."""
        head, committed, tail = Signal(bits), Signal(bits), Signal(bits)
        """head: next write; committed: end of the last whole packet; tail: next read."""
        overflowed = Signal()
        beat = self.input.payload
        stores = beat.keep.any()
        room = (head - tail)[:bits] < depth

        with m.If(self.input.valid):
            with m.If(room & stores):
                m.d.comb += [write.addr.eq(head[:bits - 1]), write.data.eq(beat.data), write.en.eq(1)]
            written_head = (head + (room & stores))[:bits]
            fits = room & ~overflowed
            with m.If(beat.last):
                with m.If(~beat.bad & fits & metas.w_rdy):
                    m.d.comb += [metas.w_en.eq(1),
                                 metas.w_data.eq(Cat(beat.length, beat.address, beat.port))]
                    m.d.sync += [head.eq(written_head), committed.eq(written_head)]
                with m.Else():
                    m.d.comb += self.overflow.eq(~beat.bad)
                    m.d.sync += head.eq(committed)
                m.d.sync += overflowed.eq(0)
            with m.Else():
                m.d.sync += [head.eq(written_head), overflowed.eq(overflowed | ~room & stores)]

        m.d.comb += [self.committed.eq(metas.w_en), self.meta.payload.eq(metas.r_data), self.meta.valid.eq(metas.r_rdy),
                     metas.r_en.eq(self.meta.ready)]
        advance = self.output.valid & self.output.ready
        next_tail = (tail + advance)[:bits]
        m.d.comb += [read.addr.eq(next_tail[:bits - 1]), self.output.payload.eq(read.data),
                     self.output.valid.eq(tail != committed)]
        m.d.sync += tail.eq(next_tail)
        return m
