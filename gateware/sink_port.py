"""The sink port: received buffers out of the board to gateware, the mirror of the
source port.

A DRAIN command names a receive slot, its buffer's number and a length; the drainer reads
the slot back from the receive store (a seek, then its words in order) and offers each
word on the ``sink`` stream with ``keep`` (which of its bytes are data), ``last`` (the
buffer's final word) and ``buffer``. A sink that is not ready holds the drain: nothing is
lost, and the slot stays the host's until DRAINED says the last word was taken. The host
drains buffers in order, so the sink sees the transfer's data as it was sent.

Where the build has the pattern checker, it watches the words as the sink takes them and
counts those that are not their buffer's test pattern (CHECK_MISMATCHES, and DRAINED's
value): data born on one board, checked as it reaches gateware on the other. With no
sink connected the board's top takes every word (the checker's, or nobody's).
docs/sink-port.md is the contract for a user's sink.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .pattern import _seed, _Walker, pattern_beat


def sink_word(width: int) -> data.StructLayout:
    return data.StructLayout({"data": width, "keep": width // 8, "last": 1, "buffer": 32})


class SinkDrain(_Walker):
    """Offers ARG1 bytes of a receive slot on the sink port (a DRAIN)."""

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(config, config.rx_slots, {
            "seek": Out(stream.Signature(config.rx_address_width)),
            "words": In(stream.Signature(config.data_width)),
            "sink": Out(stream.Signature(sink_word(config.data_width))),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        W = self.config.beat_bytes
        address, _, remaining, step = self.walk(m)
        seeking, buffer = Signal(), Signal(32)
        with m.If(self.command.valid & ~self.busy):
            m.d.sync += [seeking.eq(1), buffer.eq(self.command.payload.buffer)]
        m.d.comb += [self.seek.valid.eq(self.busy & seeking), self.seek.payload.eq(address)]
        with m.If(self.seek.valid):  # always taken
            m.d.sync += seeking.eq(0)
        draining = self.busy & ~seeking & (remaining != 0)
        word = self.sink.payload
        m.d.comb += [self.sink.valid.eq(draining & self.words.valid), self.words.ready.eq(draining & self.sink.ready),
                     step.eq(self.sink.valid & self.sink.ready),
                     word.data.eq(self.words.payload), word.keep.eq(Cat(*(i < remaining for i in range(W)))),
                     word.last.eq(remaining <= W), word.buffer.eq(buffer)]
        with m.If(self.busy & ~seeking & (remaining == 0)):
            m.d.sync += self.busy.eq(0)
            m.d.comb += self.done.eq(1)
        return m


class PatternChecker(wiring.Component):
    """Counts the sink's words, as they are taken, that are not their buffer's test pattern
    (the bytes ``keep`` marks); the count starts over with each DRAIN (``start``)."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        super().__init__({"start": In(1), "buffer": In(32), "word": In(sink_word(config.data_width)),
                          "taken": In(1), "mismatches": Out(32)})

    def elaborate(self, platform) -> Module:
        m = Module()
        state = Signal(32)
        beat, next_state = pattern_beat(state, self.config.beat_bytes)
        differs = Cat(*((self.word.data[8 * i:8 * i + 8] != beat[8 * i:8 * i + 8]) & self.word.keep[i]
                        for i in range(self.config.beat_bytes))).any()
        with m.If(self.start):
            m.d.sync += [state.eq(_seed(self.buffer)), self.mismatches.eq(0)]
        with m.Elif(self.taken):
            m.d.sync += [state.eq(next_state), self.mismatches.eq(self.mismatches + differs)]
        return m
