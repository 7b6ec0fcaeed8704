"""An example of gateware on a receiving board: a paced consumer on the sink port.

``PacedSink`` stands in for a DAC or a recorder that takes one word every ``every``
cycles: it holds ``ready`` low between, and the drain waits for it (nothing is lost; the
host's next DRAIN waits for DRAINED). ``buffers`` counts the buffers it took whole, by
their ``last`` words. Build a board with it on the sink port:

    python -m netblt.hw.example_sink --board versa_ecp5 --output build/sink

then ``netblt recv --board ADDR --sink port``: each buffer received whole goes to it, in
order. docs/sink-port.md is the port's contract.
"""

from __future__ import annotations

import sys

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..gateware.sink_port import sink_word
from .build import build_example


class PacedSink(wiring.Component):
    def __init__(self, every: int = 4, width: int = 32) -> None:
        self.every = every
        super().__init__({"sink": In(stream.Signature(sink_word(width))), "buffers": Out(32)})

    def elaborate(self, platform) -> Module:
        m = Module()
        wait = Signal(range(self.every))
        with m.If(wait == 0):
            m.d.sync += wait.eq(self.every - 1)
        with m.Else():
            m.d.sync += wait.eq(wait - 1)
        m.d.comb += self.sink.ready.eq(wait == 0)
        with m.If(self.sink.valid & self.sink.ready & self.sink.payload.last):
            m.d.sync += self.buffers.eq(self.buffers + 1)
        return m


def paced_sink(m: Module, platform, sink: stream.Interface) -> None:
    """BoardTop's ``sink``: the paced consumer, in the engine's clock. Gateware on its own
    clock crosses from it through ``amaranth.lib.fifo.AsyncFIFO``."""
    m.submodules.consumer = consumer = PacedSink(width=len(sink.payload.data))
    wiring.connect(m, sink, consumer.sink)


def main(argv: list[str] | None = None) -> int:
    return build_example(argv, __doc__, "build/sink", sink=paced_sink)


if __name__ == "__main__":
    sys.exit(main())
