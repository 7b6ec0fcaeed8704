"""NETBLT and UDP headers as beats: formats/ layouts turned into gateware, never retyped.

Lane order on every stream is LiteEth's: the first byte on the wire is bits [7:0] of a
beat. Multi-byte fields are big-endian on the wire (reading A1), so a field's most
significant byte is its first byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from amaranth.hdl import Cat, Const, Value

from ..formats import rfc998 as L
from ..formats.layout import Layout

DATA_LAYOUTS = (L.HEADER, L.DATA)
"""The 24-byte DATA/LDATA header, which its checksum covers (reading A13)."""


def layouts_size(layouts: Sequence[Layout]) -> int:
    return sum(layout.end - layout.start for layout in layouts)


def header_bytes(layouts: Sequence[Layout], values: Mapping[str, Value | int]) -> list[Value]:
    """The header's bytes in wire order; fields not given (padding) are zero."""
    out: list[Value] = []
    for layout in layouts:
        for field in layout.fields:
            value = values.get(field.name, 0)
            if isinstance(value, int):
                value = Const(value, 8 * field.width)
            value = Cat(value, Const(0, 8 * field.width))
            out += [value[8 * (field.width - 1 - k):][:8] for k in range(field.width)]
    return out


def header_fields(layouts: Sequence[Layout], data: Sequence[Value]) -> dict[str, Value]:
    """Each field's value from the header's bytes (``data`` in wire order)."""
    fields: dict[str, Value] = {}
    at = 0
    for layout in layouts:
        for field in layout.fields:
            fields[field.name] = Cat(*reversed(data[at:at + field.width]))
            at += field.width
    return fields


def to_beats(data: Sequence[Value], beat_bytes: int) -> list[Value]:
    if len(data) % beat_bytes:
        raise ValueError(f"{len(data)} header bytes are not whole {beat_bytes}-byte beats")
    return [Cat(*data[i:i + beat_bytes]) for i in range(0, len(data), beat_bytes)]


def lanes(beat: Value, beat_bytes: int) -> list[Value]:
    """A beat's bytes in wire order."""
    return [beat[8 * i:8 * i + 8] for i in range(beat_bytes)]


def halfwords(data: Sequence[Value]) -> list[Value]:
    """Big-endian 16-bit words of an even run of bytes, as the Internet checksum reads them."""
    return [Cat(data[i + 1], data[i]) for i in range(0, len(data), 2)]


def fold(total: Value) -> Value:
    """A ones'-complement sum of up to 32 bits folded to 16 (end-around carry)."""
    once = total[:16] + total[16:32]
    return (once[:16] + once[16])[:16]
