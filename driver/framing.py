"""The per-packet fast path for DATA/LDATA headers, derived from the host layouts.

:func:`pack` lays out a run of DATA packets for sending; driver/_fastpath.c does it
(and reassembly's placing) in C where the Makefile built it, else the Python here does.
"""

from __future__ import annotations

import math
import struct
from typing import NamedTuple

from ..formats import rfc998 as L
from ..formats.checksum import internet_checksum
from .compiled import fastpath

HEADER_SIZE = L.DATA_HEADER_SIZE
_STRUCT = struct.Struct(">" + L.HEADER.struct.format[1:] + L.DATA.struct.format[1:])
_NAMES = L.HEADER.names + L.DATA.names
_CHECKSUM = struct.Struct(">H")
# The hot path packs positionally; this is the order the layouts give, checked at import.
assert _NAMES == ("checksum", "version", "type", "length", "local_port", "foreign_port", "pad",
                  "buffer", "high_ack", "packet", "data_checksum", "flags"), _NAMES
_PADDING = (b"", b"\0\0\0", b"\0\0", b"\0")

if fastpath is not None:
    _FIELDS = {f.name: f for f in L.HEADER.fields + L.DATA.fields}
    fastpath.layout(tuple((_FIELDS[name].offset, _FIELDS[name].width) for name in (
                        # the order of the C code's field enum
                        "checksum", "version", "type", "length", "local_port", "foreign_port", "buffer",
                        "high_ack", "packet", "data_checksum", "flags")),
                    HEADER_SIZE, L.VERSION, L.PacketType.DATA, L.PacketType.LDATA, L.FLAG_LAST_BUFFER)


class DataHeader(NamedTuple):
    ldata: bool
    length: int
    local_port: int
    foreign_port: int
    buffer: int
    high_ack: int
    packet: int
    data_checksum: int
    last_buffer: bool


class FrameError(ValueError):
    """A DATA/LDATA packet to count and drop; the message names the reason."""


def build_header(buf: bytearray | memoryview, *, local_port: int, foreign_port: int, buffer: int, packet: int,
                 high_ack: int, ldata: bool, last_buffer: bool, payload: memoryview,
                 data_checksum: bool) -> bytes:
    """The 24-byte header for ``payload``, plus the padding that aligns the packet."""
    _STRUCT.pack_into(buf, 0, 0, L.VERSION, L.PacketType.LDATA if ldata else L.PacketType.DATA,
                      HEADER_SIZE + len(payload), local_port, foreign_port, 0, buffer, high_ack,
                      packet, internet_checksum(payload) if data_checksum else 0,
                      L.FLAG_LAST_BUFFER if last_buffer else 0)
    _CHECKSUM.pack_into(buf, 0, internet_checksum(buf))
    return _PADDING[len(payload) % 4]


def is_data(datagram: memoryview) -> bool:
    return len(datagram) > 3 and datagram[3] in (L.PacketType.DATA, L.PacketType.LDATA)


def parse_header(datagram: memoryview, data_checksum: bool) -> DataHeader:
    """Check a DATA/LDATA packet and return its header; raises :class:`FrameError`."""
    if len(datagram) < HEADER_SIZE:
        raise FrameError("truncated")
    (checksum, version, kind, length, local_port, foreign_port, _pad, buffer, high_ack,
     packet, dsum, flags) = _STRUCT.unpack_from(datagram)
    if version != L.VERSION:
        raise FrameError("version")
    if not HEADER_SIZE <= length <= len(datagram) or len(datagram) - length > 3:
        raise FrameError("length")
    if internet_checksum(datagram[:HEADER_SIZE]) != 0:
        raise FrameError("checksum")
    if data_checksum and internet_checksum(datagram[HEADER_SIZE:length]) != dsum:
        raise FrameError("data checksum")
    return DataHeader(kind == L.PacketType.LDATA, length, local_port, foreign_port, buffer,
                      high_ack, packet, dsum, bool(flags & L.FLAG_LAST_BUFFER))


def python_pack(out: bytearray, data: bytes | bytearray | memoryview, packet_size: int, first: int, n: int,
                buffer: int, high_ack: int, last_buffer: bool, local_port: int, foreign_port: int,
                data_checksum: bool) -> tuple[int, int]:
    """Packets ``first`` .. ``first + n - 1`` of buffer ``buffer`` (its data ``data``), each
    header, payload and padding, back to back into ``out``; returns the bytes written and
    the first packet's size (every packet's but a shorter LDATA's)."""
    count = max(1, math.ceil(len(data) / packet_size))
    if packet_size < 1 or first < 0 or n < 1 or first + n > count:
        raise ValueError("pack: packets outside the buffer")
    view, at, segment = memoryview(data), 0, 0
    for p in range(first, first + n):
        payload = view[p * packet_size:(p + 1) * packet_size]
        end = at + HEADER_SIZE + len(payload) + (-len(payload) % 4)
        if end > len(out):
            raise ValueError("pack: the output is too small")
        padding = build_header(memoryview(out)[at:at + HEADER_SIZE], local_port=local_port,
                               foreign_port=foreign_port, buffer=buffer, packet=p, high_ack=high_ack,
                               ldata=p == count - 1, last_buffer=last_buffer, payload=payload,
                               data_checksum=data_checksum)
        out[at + HEADER_SIZE:end] = bytes(payload) + padding
        segment = segment or end - at
        at = end
    return at, segment


pack = fastpath.pack if fastpath else python_pack
