"""The source port: data born on the board, taken into transmit slots as it comes.

A source (a digitizer, or the built-in stamps below) offers words on a stream: ``data``,
``last`` (it marks the end of its own buffer), ``valid`` and ``ready``. A TAKE command
names a transmit slot and a length; the taker then writes the words offered into the
slot, one a cycle at most, and ends when the length is in. ``ready`` is high only while a
take runs and the store takes writes: a source that cannot wait loses what it offers
otherwise, and each such cycle counts in SOURCE_REFUSED (for a source that offers each
word for one cycle, the words lost; for one that waits, the cycles it waited).
SOURCE_TAKEN counts the words taken, and SOURCE_EARLY_ENDS the words marked ``last``
that did not end a take. docs/source-port.md is the contract for a user's source.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .pattern import _Walker
from .transmit_store import store_write


def source_word(width: int) -> data.StructLayout:
    return data.StructLayout({"data": width, "last": 1})


class SourceTaker(_Walker):
    """Takes ARG1 bytes of the source's words into a transmit slot (a TAKE)."""

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(config, config.tx_slots, {
            "source": In(stream.Signature(source_word(config.data_width))),
            "write": Out(stream.Signature(store_write(config))),
            "taken": Out(1), "refused": Out(1), "early_end": Out(1),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        address, _, remaining, step = self.walk(m)
        word = self.source.payload
        taking = self.busy & (remaining != 0)
        m.d.comb += [self.write.valid.eq(taking & self.source.valid),
                     self.write.payload.address.eq(address), self.write.payload.data.eq(word.data),
                     self.source.ready.eq(taking & self.write.ready),
                     step.eq(self.write.valid & self.write.ready),
                     self.taken.eq(step), self.refused.eq(self.source.valid & ~self.source.ready),
                     self.early_end.eq(step & word.last & (remaining > self.config.beat_bytes))]
        with m.If(self.busy & (remaining == 0)):
            m.d.sync += self.busy.eq(0)
            m.d.comb += self.done.eq(1)
        return m


class StampSource(wiring.Component):
    """The built-in source: from a write of ``every`` (a ``restart``), it offers 0, 1, 2 ...
    (in a beat's low 32 bits), one every ``every`` cycles (0: none), each for one cycle:
    it does not wait. The words' numbers say what was lost and when: word n was offered
    n x ``every`` cycles after the restart, and a receiver sees each word the port
    refused as a gap, so SOURCE_REFUSED can be checked from the data alone."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        super().__init__({"every": In(16), "restart": In(1),
                          "source": Out(stream.Signature(source_word(config.data_width)))})

    def elaborate(self, platform) -> Module:
        m = Module()
        wait, number = Signal(16), Signal(32)
        due = (wait == 0) & (self.every != 0)
        with m.If(self.restart):
            m.d.sync += [wait.eq(0), number.eq(0)]
        with m.Else():
            m.d.sync += wait.eq(Mux(due, self.every - 1, Mux(wait == 0, 0, wait - 1)))
            m.d.sync += number.eq(number + due)
        m.d.comb += [self.source.valid.eq(due & ~self.restart), self.source.payload.data.eq(number)]
        return m
