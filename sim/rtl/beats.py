"""cocotb's side of the engine's streams: Amaranth layouts packed to and from ints.

Amaranth exports a stream as ``<name>__payload`` (the layout flattened, first field in
the low bits), ``<name>__valid`` and ``<name>__ready``. These helpers move whole
payloads as dicts, one beat per clock when both sides are willing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from amaranth.hdl import Shape
from amaranth.lib import data
from cocotb.triggers import ReadOnly, RisingEdge


def _fields(layout: data.Layout):
    for name, field in layout:
        yield name, field.offset, field.shape


def pack(layout: data.Layout, values: dict[str, Any]) -> int:
    word = 0
    for name, offset, shape in _fields(layout):
        value = values.get(name, 0)
        if isinstance(shape, data.Layout):
            value = pack(shape, value) if isinstance(value, dict) else value
            width = shape.size
        else:
            width = Shape.cast(shape).width
        word |= (int(value) & ((1 << width) - 1)) << offset
    return word


def unpack(layout: data.Layout, word: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, offset, shape in _fields(layout):
        if isinstance(shape, data.Layout):
            out[name] = unpack(shape, (word >> offset) & ((1 << shape.size) - 1))
        else:
            out[name] = (word >> offset) & ((1 << Shape.cast(shape).width) - 1)
    return out


class BeatSource:
    """Drives ``<name>__valid/payload`` from a queue of beats, optionally with gaps."""

    def __init__(self, dut, name: str, layout: data.Layout, *, idle: float = 0.0,
                 rng: random.Random | None = None) -> None:
        self.clk = dut.clk
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.layout, self.idle, self.rng = layout, idle, rng or random.Random(1)
        self.valid.value = 0

    async def send(self, beats: Iterable[dict[str, Any]]) -> None:
        for beat in beats:
            while self.idle and self.rng.random() < self.idle:
                self.valid.value = 0
                await RisingEdge(self.clk)
            self.payload.value = pack(self.layout, beat) if self.layout else beat
            self.valid.value = 1
            while True:
                await ReadOnly()
                accepted = bool(self.ready.value)
                await RisingEdge(self.clk)
                if accepted:
                    break
        self.valid.value = 0


class BeatSink:
    """Collects ``<name>`` beats; ``stall`` is the chance of holding ready low a cycle.

    With no layout the payloads are plain ints.
    """

    def __init__(self, dut, name: str, layout: data.Layout, *, stall: float = 0.0,
                 rng: random.Random | None = None) -> None:
        self.clk = dut.clk
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.layout, self.stall, self.rng = layout, stall, rng or random.Random(2)
        self.beats: list[tuple[int, dict[str, Any]]] = []
        """(cycle, payload) of every beat taken."""

    async def run(self) -> None:
        cycle = 0
        while True:
            ready = not (self.stall and self.rng.random() < self.stall)
            self.ready.value = int(ready)
            await ReadOnly()
            if ready and self.valid.value:
                word = int(self.payload.value)
                self.beats.append((cycle, unpack(self.layout, word) if self.layout else word))
            await RisingEdge(self.clk)
            cycle += 1

    def packets(self) -> list[tuple[int, list[dict[str, Any]]]]:
        """The beats grouped into packets at ``last``: (cycle of first beat, beats)."""
        out, current, start = [], [], 0
        for cycle, beat in self.beats:
            if not current:
                start = cycle
            current.append(beat)
            if beat["last"]:
                out.append((start, current))
                current = []
        return out


async def take(dut, name: str, count: int, *, stall: float = 0.0, rng: random.Random | None = None,
               check: Callable[[], None] | None = None) -> list[int]:
    """The next ``count`` payloads of stream ``name``, ready held low a cycle with chance
    ``stall``; ``check()`` runs every cycle once the values settle."""
    rng = rng or random.Random(2)
    valid, ready, payload = (getattr(dut, f"{name}__{part}") for part in ("valid", "ready", "payload"))
    got: list[int] = []
    while len(got) < count:
        taking = rng.random() >= stall
        ready.value = int(taking)
        await ReadOnly()
        if check:
            check()
        if taking and valid.value:
            got.append(int(payload.value))
        await RisingEdge(dut.clk)
    ready.value = 0
    return got


def beat_bytes(beats: Iterable[dict[str, Any]], width: int) -> bytes:
    """The bytes the beats carry: lanes in wire order, only those ``keep`` marks."""
    out = bytearray()
    for beat in beats:
        word = beat["data"].to_bytes(width, "little")
        out += bytes(b for i, b in enumerate(word) if beat["keep"] >> i & 1)
    return bytes(out)


def to_beats(packet: bytes, width: int, **fields: Any) -> list[dict[str, Any]]:
    """A packet as beats, the last one partly kept; ``fields`` go on every beat."""
    beats = []
    for at in range(0, max(len(packet), 1), width):
        chunk = packet[at:at + width]
        beats.append({**fields, "data": int.from_bytes(chunk.ljust(width, b"\0"), "little"),
                      "keep": (1 << len(chunk)) - 1, "last": at + width >= len(packet)})
    return beats
