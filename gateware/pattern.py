"""A deterministic test pattern keyed by buffer number: line-rate runs need no upload.

The pattern is formats/pattern.py's. A generator makes one beat per cycle; the same
function in Python (``pattern_bytes``) is what tests compare with. Its checker watches
the sink port (gateware/sink_port.py).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats.pattern import SEED_MIX
from .config import EngineConfig
from .transmit_store import store_write

def _xorshift(x: Value) -> Value:
    x = x ^ (x << 13)[:32]
    x = x ^ (x >> 17)
    return x ^ (x << 5)[:32]


def pattern_beat(state: Value, beat_bytes: int) -> tuple[Value, Value]:
    """The beat of the pattern that follows ``state``, and the state after it."""
    words, x = [], state
    for _ in range(beat_bytes // 4):
        x = _xorshift(x)
        words.append(x)
    return Cat(*words), words[-1]


def _seed(buffer: Value) -> Value:
    mixed = buffer ^ SEED_MIX
    return Mux(mixed == 0, SEED_MIX, mixed)


PATTERN_COMMAND = data.StructLayout({"slot": 4, "buffer": 32, "length": 32})
"""A slot command's fields: fill (FILL), take into (TAKE) or drain (DRAIN) the first
``length`` bytes of ``slot``, as buffer ``buffer``."""


class _Walker(wiring.Component):
    """Steps through a slot's beats and the pattern's states together."""

    def __init__(self, config: EngineConfig, slots: int, members: dict) -> None:
        self.config = config
        self._slots = slots
        super().__init__({
            "command": In(stream.Signature(PATTERN_COMMAND)),
            "busy": Out(1),
            "done": Out(1),
            **members,
        })

    def walk(self, m: Module):
        """Returns (address, expected beat, bytes left, step): the caller drives ``step``."""
        cfg = self.config
        W = cfg.beat_bytes
        state = Signal(32)
        address = Signal(range(self._slots * cfg.slot_words))
        remaining = Signal(32)
        step = Signal()
        beat, next_state = pattern_beat(state, W)

        cmd = self.command.payload
        m.d.comb += self.command.ready.eq(~self.busy)
        with m.If(self.command.valid & ~self.busy):
            ok = (cmd.slot < self._slots) & (cmd.length <= cfg.slot_bytes)
            m.d.sync += [state.eq(_seed(cmd.buffer)), remaining.eq(Mux(ok, cmd.length, 0)),
                         address.eq(cmd.slot * cfg.slot_words)]
            m.d.sync += self.busy.eq(1)
        with m.If(self.busy & step):
            m.d.sync += [state.eq(next_state), address.eq(address + 1),
                         remaining.eq(Mux(remaining > W, remaining - W, 0))]
        return address, beat, remaining, step


class PatternSource(_Walker):
    """Fills a slot with buffer n's pattern, one beat per cycle while the store takes it."""

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(config, config.tx_slots, {"write": Out(stream.Signature(store_write(config)))})

    def elaborate(self, platform) -> Module:
        m = Module()
        address, beat, remaining, step = self.walk(m)
        m.d.comb += [self.write.valid.eq(self.busy & (remaining != 0)),
                     self.write.payload.address.eq(address), self.write.payload.data.eq(beat),
                     step.eq(self.write.valid & self.write.ready)]
        with m.If(self.busy & (remaining == 0)):
            m.d.sync += self.busy.eq(0)
            m.d.comb += self.done.eq(1)
        return m
