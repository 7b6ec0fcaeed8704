"""An example of data born on a board: a digitizer's samples into the source port.

``FramedRamp`` stands in for an ADC: every ``every`` cycles it has a 16-bit sample (a
ramp), packs two into a 32-bit word, offers each word for one cycle (an ADC cannot wait)
and marks the last word of each ``frame_words``-word frame with ``last``. Build a board
with it feeding the source port instead of the built-in stamps:

    python -m netblt.hw.example_digitizer --board colorlight_5a75b --output build/digitizer

then ``netblt send --board ADDR --source port --buffer-size 16K --size 1G PEER``: with a
buffer size a multiple of the frame (4 KiB here), SOURCE_EARLY_ENDS stays 0 while no
word is refused. docs/source-port.md is the port's contract.
"""

from __future__ import annotations

import sys

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import Out

from ..gateware.source_port import source_word
from .build import build_example


class FramedRamp(wiring.Component):
    def __init__(self, every: int = 25, frame_words: int = 1024) -> None:
        self.every, self.frame_words = every, frame_words
        super().__init__({"source": Out(stream.Signature(source_word(32)))})

    def elaborate(self, platform) -> Module:
        m = Module()
        wait, sample = Signal(range(self.every)), Signal(16)
        held, half, words = Signal(16), Signal(), Signal(range(self.frame_words))
        due = wait == 0
        m.d.sync += wait.eq(Mux(due, self.every - 1, wait - 1))
        with m.If(due):  # a sample: the first of a word is held, the second completes it
            m.d.sync += [sample.eq(sample + 1), half.eq(~half), held.eq(sample)]
            with m.If(half):
                m.d.sync += words.eq(Mux(words == self.frame_words - 1, 0, words + 1))
        word = self.source.payload
        m.d.comb += [self.source.valid.eq(due & half), word.data.eq(Cat(held, sample)),
                     word.last.eq(words == self.frame_words - 1)]
        return m


def ramp_source(m: Module, platform) -> stream.Interface:
    """BoardTop's ``source``: the ramp, in the engine's clock. A digitizer on its own
    clock crosses into it through ``amaranth.lib.fifo.AsyncFIFO`` first."""
    m.submodules.digitizer = digitizer = FramedRamp()
    return digitizer.source


def main(argv: list[str] | None = None) -> int:
    return build_example(argv, __doc__, "build/digitizer", source=ramp_source)


if __name__ == "__main__":
    sys.exit(main())
