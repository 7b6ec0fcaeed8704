"""How a format is written down: byte layouts of packet fields, and bit fields of words.

Every format in this package is a value of these two classes, so each side (host codec,
gateware, C core, docs) reads the same definition in its own terms.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property

_STRUCT_CODES = {1: "B", 2: "H", 4: "I"}


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    width: int
    """Width in bytes: 1, 2 or 4."""

    @property
    def end(self) -> int:
        return self.offset + self.width


@dataclass(frozen=True)
class Layout:
    """A fixed run of fields; padding fields are named ``pad*`` and always sent as zero."""

    name: str
    fields: tuple[Field, ...]

    def __post_init__(self) -> None:
        at = self.start
        for field in self.fields:
            if field.offset != at or field.width not in _STRUCT_CODES:
                raise ValueError(f"{self.name}: field {field.name} breaks the layout")
            if field.width == 4 and field.offset % 4:
                raise ValueError(f"{self.name}: longword {field.name} is not aligned")
            at = field.end

    @cached_property
    def start(self) -> int:
        return self.fields[0].offset

    @cached_property
    def end(self) -> int:
        """Read for every datagram the host decodes: worked out once."""
        return self.fields[-1].end

    @cached_property
    def struct(self) -> struct.Struct:
        return struct.Struct(">" + "".join(_STRUCT_CODES[f.width] for f in self.fields))

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field:
        for field in self.fields:
            if field.name == name:
                return field
        raise KeyError(name)


def sequential(name: str, start: int, *spec: tuple[str, int]) -> Layout:
    """A layout of ``(name, width)`` fields one after another from ``start``."""
    fields, at = [], start
    for field_name, width in spec:
        fields.append(Field(field_name, at, width))
        at += width
    return Layout(name, tuple(fields))


@dataclass(frozen=True)
class Word:
    """A register word's bit fields, from bit 0 up: packed and unpacked by the host, laid
    out for the gateware, described in the docs, all from this one definition."""

    name: str
    fields: tuple[tuple[str, int], ...]

    @property
    def bits(self) -> int:
        return sum(width for _, width in self.fields)

    def pack(self, **values: int) -> int:
        word, at = 0, 0
        for name, width in self.fields:
            value = values.pop(name, 0)
            if not 0 <= value < 1 << width:
                raise ValueError(f"{self.name}.{name} = {value} does not fit {width} bits")
            word |= value << at
            at += width
        if values:
            raise ValueError(f"{self.name} has no field {', '.join(values)}")
        return word

    def unpack(self, word: int) -> dict[str, int]:
        out, at = {}, 0
        for name, width in self.fields:
            out[name] = word >> at & ((1 << width) - 1)
            at += width
        return out

    def width(self, field: str) -> int:
        return dict(self.fields)[field]

    def offset(self, field: str) -> int:
        """The lowest bit of ``field``."""
        at = 0
        for name, width in self.fields:
            if name == field:
                return at
            at += width
        raise KeyError(f"{self.name} has no field {field}")

    def describe(self) -> str:
        parts, at = [], 0
        for name, width in self.fields:
            parts.append(f"{at + width - 1}:{at} {name}" if width > 1 else f"{at} {name}")
            at += width
        return "; ".join(reversed(parts))
