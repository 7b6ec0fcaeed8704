"""A stream cut into two timing paths: valid and ready are both registered across it.

Where LiteEth's streams meet the host link and the engine, valid, ready and the
payload checks would otherwise form one long path through both; this costs a few
cycles of latency and nothing in throughput.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out


class StreamBuffer(wiring.Component):
    def __init__(self, payload: data.Layout, depth: int = 4) -> None:
        self._layout, self._depth = payload, depth
        super().__init__({"input": In(stream.Signature(payload)), "output": Out(stream.Signature(payload))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.fifo = queue = fifo.SyncFIFOBuffered(width=self._layout.size, depth=self._depth)
        m.d.comb += [
            queue.w_data.eq(self.input.payload), queue.w_en.eq(self.input.valid), self.input.ready.eq(queue.w_rdy),
            self.output.payload.eq(queue.r_data), self.output.valid.eq(queue.r_rdy), queue.r_en.eq(self.output.ready),
        ]
        return m
