"""Encode and decode every RFC 998 packet from the layouts in :mod:`.layout`.

``decode`` accepts any bytes and either returns a :class:`Frame` or raises
:class:`CodecError` saying what is wrong; it never raises anything else.
"""

from __future__ import annotations

import functools
import struct

from ..formats import rfc998 as L
from ..formats.checksum import internet_checksum
from ..formats.layout import Layout
from .packets import (
    Abort, Control, Data, Done, Frame, Go, KeepAlive, Message, NullAck, Ok, Open, Packet, Quit, QuitAck, Refused,
    Resend, Response, Setup,
)

_U16 = struct.Struct(">H")
_SETUP: dict[L.PacketType, type[Open | Response]] = {L.PacketType.OPEN: Open, L.PacketType.RESPONSE: Response}
_REASONED: dict[L.PacketType, type[Quit | Abort | Refused]] = {
    L.PacketType.QUIT: Quit, L.PacketType.ABORT: Abort, L.PacketType.REFUSED: Refused}
_BARE: dict[L.PacketType, type[KeepAlive | QuitAck | Done]] = {
    L.PacketType.KEEPALIVE: KeepAlive, L.PacketType.QUITACK: QuitAck, L.PacketType.DONE: Done}
assert set(_REASONED) == L.STRING_TYPES and set(_BARE) == L.BARE_TYPES  # formats/rfc998.py's, by class


class CodecError(ValueError):
    """A packet that cannot be decoded, or a value that cannot be encoded."""


def pack(layout: Layout, buf: bytearray | memoryview, **values: int) -> None:
    """Write ``values`` into ``buf`` at the layout's offsets; padding and unnamed fields are 0."""
    try:
        layout.struct.pack_into(buf, layout.start, *(values.get(n, 0) for n in layout.names))
    except struct.error as exc:
        raise CodecError(f"{layout.name}: {exc}") from None


def unpack(layout: Layout, buf: bytes | bytearray | memoryview, at: int = 0) -> dict[str, int]:
    return dict(zip(layout.names, layout.struct.unpack_from(buf, at + layout.start)))


# -- encoding ---------------------------------------------------------------------------


def encode_string(text: str | bytes) -> bytes:
    raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    if b"\0" in raw:
        raise CodecError("a NETBLT string cannot contain a NUL byte")
    return raw + bytes(L.aligned(len(raw) + 1) - len(raw))


def encode(packet: Packet, local_port: int, foreign_port: int, *, data_checksum: bool = False) -> bytes:
    """The packet's bytes. For DATA/LDATA, ``data_checksum`` is the negotiated C flag."""
    buf, length = _packet_bytes(packet, data_checksum)
    if length > 0xFFFF:
        raise CodecError(f"packet of {length} bytes exceeds the 16-bit length field")
    pack(L.HEADER, buf, version=L.VERSION, type=packet.type, length=length,
         local_port=local_port, foreign_port=foreign_port)
    covered = L.DATA_HEADER_SIZE if isinstance(packet, Data) else length
    _U16.pack_into(buf, 0, internet_checksum(memoryview(buf)[:covered]))
    return bytes(buf)


def _packet_bytes(packet: Packet, data_checksum: bool) -> tuple[bytearray, int]:
    """The whole packet with a blank common header, and its Length field."""
    if isinstance(packet, Data):
        payload = bytes(packet.payload)
        buf = bytearray(L.DATA.end) + payload + bytes(L.aligned(len(payload)) - len(payload))
        pack(L.DATA, buf, buffer=packet.buffer, high_ack=packet.high_ack, packet=packet.packet,
             data_checksum=internet_checksum(payload) if data_checksum else 0,
             flags=L.FLAG_LAST_BUFFER if packet.last_buffer else 0)
        return buf, L.DATA.end + len(payload)
    if isinstance(packet, Setup):
        buf = bytearray(L.OPEN.end)
        flags = (L.FLAG_DATA_CHECKSUM if packet.data_checksum else 0) | (
            L.FLAG_WRITE_MODE if packet.write_mode else 0)
        pack(L.OPEN, buf, uid=packet.uid, buffer_size=packet.buffer_size,
             transfer_size=packet.transfer_size, packet_size=packet.packet_size,
             burst_size=packet.burst_size, burst_interval=packet.burst_interval,
             death_timer=packet.death_timer, flags=flags, max_buffers=packet.max_buffers)
        buf += encode_string(packet.client_string)
    elif isinstance(packet, (Quit, Abort, Refused)):
        buf = bytearray(L.HEADER.end) + encode_string(packet.reason)
    elif isinstance(packet, (KeepAlive, QuitAck, Done)):
        buf = bytearray(L.HEADER.end)
    elif isinstance(packet, NullAck):
        buf = bytearray(L.NULL_ACK.end)
        pack(L.NULL_ACK, buf, high_ack=packet.high_ack, burst_size=packet.burst_size,
             burst_interval=packet.burst_interval)
    elif isinstance(packet, Control):
        buf = bytearray(L.HEADER.end) + b"".join(encode_message(m) for m in packet.messages)
    else:
        raise CodecError(f"cannot encode {packet!r}")
    return buf, len(buf)


@functools.lru_cache(maxsize=1024)
def encode_message(message: Message) -> bytes:
    """A control message's bytes, kept for the messages seen last: the receiver sends each
    again in every CONTROL packet until it is acknowledged (40 a packet encoded each time
    cost 80 us)."""
    if isinstance(message, Go):
        kind, buf = L.MessageType.GO, bytearray(L.MESSAGE.end)
    elif isinstance(message, Ok):
        kind, buf = L.MessageType.OK, bytearray(L.OK_BODY.end)
        pack(L.OK_BODY, buf, burst_size=message.burst_size,
             burst_interval=message.burst_interval, control_timer=message.control_timer)
    elif isinstance(message, Resend):
        kind, buf = L.MessageType.RESEND, bytearray(L.RESEND_BODY.end)
        pack(L.RESEND_BODY, buf, count=len(message.packets))
        try:
            numbers = struct.pack(f">{len(message.packets)}H", *message.packets)
        except struct.error as exc:
            raise CodecError(f"resend: {exc}") from None
        buf += numbers + bytes(L.aligned(len(numbers)) - len(numbers))
    else:
        raise CodecError(f"cannot encode message {message!r}")
    pack(L.MESSAGE, buf, type=kind, seq=message.seq, buffer=message.buffer)
    return bytes(buf)


# -- decoding ---------------------------------------------------------------------------


def decode(datagram: bytes | bytearray | memoryview, *, data_checksum: bool = False) -> Frame:
    """Parse one NETBLT packet; with ``data_checksum`` also verify a DATA packet's data."""
    buf = memoryview(datagram)
    if len(buf) < L.HEADER.end:
        raise CodecError(f"truncated: {len(buf)} bytes, the common header needs {L.HEADER.end}")
    header = unpack(L.HEADER, buf)
    if header["version"] != L.VERSION:
        raise CodecError(f"unsupported version {header['version']} (expected {L.VERSION})")
    try:
        kind = L.PacketType(header["type"])
    except ValueError:
        raise CodecError(f"unknown packet type {header['type']}") from None
    length = header["length"]
    is_data = kind in (L.PacketType.DATA, L.PacketType.LDATA)
    minimum = L.MIN_LENGTH[kind]
    if length < minimum:
        raise CodecError(f"length {length} is too short for {kind.name} (at least {minimum})")
    if length > len(buf):
        raise CodecError(f"truncated: length field says {length}, datagram has {len(buf)} bytes")
    if len(buf) not in (length, L.aligned(length)):
        raise CodecError(f"length mismatch: length field says {length}, datagram has {len(buf)} bytes")
    if not is_data and length % L.ALIGNMENT:
        raise CodecError(f"length {length} of {kind.name} is not a multiple of {L.ALIGNMENT}")
    covered = buf[:L.DATA_HEADER_SIZE] if is_data else buf[:length]
    if internet_checksum(covered) != 0:
        raise CodecError(f"bad checksum on {kind.name}")
    packet = _decode_body(kind, buf[:length], data_checksum)
    return Frame(packet, header["local_port"], header["foreign_port"])


def _decode_body(kind: L.PacketType, buf: memoryview, data_checksum: bool) -> Packet:
    end = len(buf)
    if kind in _SETUP:
        f = unpack(L.OPEN, buf)
        return _SETUP[kind](
            uid=f["uid"], buffer_size=f["buffer_size"], transfer_size=f["transfer_size"],
            packet_size=f["packet_size"], burst_size=f["burst_size"],
            burst_interval=f["burst_interval"], death_timer=f["death_timer"],
            max_buffers=f["max_buffers"], data_checksum=bool(f["flags"] & L.FLAG_DATA_CHECKSUM),
            write_mode=bool(f["flags"] & L.FLAG_WRITE_MODE),
            client_string=decode_string(buf[L.OPEN.end:end], "client string"))
    if kind in _REASONED:
        reason = decode_string(buf[L.HEADER.end:end], "reason").decode("utf-8", "replace")
        return _REASONED[kind](reason)
    if kind in L.EXACT_TYPES and end != L.MIN_LENGTH[kind]:
        raise CodecError(f"{kind.name} must be {L.MIN_LENGTH[kind]} bytes, length says {end}")
    if kind in _BARE:
        return _BARE[kind]()
    if kind is L.PacketType.NULL_ACK:
        f = unpack(L.NULL_ACK, buf)
        return NullAck(f["high_ack"], f["burst_size"], f["burst_interval"])
    if kind is L.PacketType.CONTROL:
        return Control(tuple(_decode_messages(buf[L.HEADER.end:end])))
    f = unpack(L.DATA, buf)
    payload = buf[L.DATA.end:end]
    if data_checksum and internet_checksum(payload) != f["data_checksum"]:
        raise CodecError(f"bad data checksum on buffer {f['buffer']} packet {f['packet']}")
    return Data(buffer=f["buffer"], packet=f["packet"], high_ack=f["high_ack"],
                payload=bytes(payload), ldata=kind is L.PacketType.LDATA,
                last_buffer=bool(f["flags"] & L.FLAG_LAST_BUFFER))


def decode_string(field: memoryview, what: str) -> bytes:
    raw = bytes(field)
    if len(raw) % L.ALIGNMENT:
        raise CodecError(f"{what} of {len(raw)} bytes is not padded to {L.ALIGNMENT}")
    text, nul, padding = raw.partition(b"\0")
    if not nul:
        raise CodecError(f"{what} is not NUL-terminated")
    if padding.strip(b"\0"):
        raise CodecError(f"bad padding: non-NUL bytes after the {what}'s terminator")
    return text


_TYPE_AT = L.MESSAGE.field("type").offset
_FIXED_SIZES = {int(L.MessageType.GO): L.MESSAGE.end, int(L.MessageType.OK): L.OK_BODY.end}
"""The messages of one size, whose size the type byte alone says."""


def _decode_messages(buf: memoryview) -> list[Message]:
    messages: list[Message] = []
    at = 0
    while at < len(buf):
        size = _message_size(buf, at)
        messages.append(_decode_message(bytes(buf[at:at + size])))
        at += size
    return messages


def _message_size(buf: memoryview, at: int) -> int:
    """The bytes of the control message at ``at``, which end inside ``buf``."""
    left = len(buf) - at
    if left < L.MESSAGE.end:
        raise CodecError(f"truncated control message at offset {at}")
    kind = buf[at + _TYPE_AT]
    size = _FIXED_SIZES.get(kind)
    if size is not None:
        if left < size:
            raise CodecError(f"truncated {L.MessageType(kind).name} message at offset {at}")
        return size
    if kind != L.MessageType.RESEND:
        raise CodecError(f"unknown control message type {kind} at offset {at}")
    if left < L.RESEND_BODY.end:
        raise CodecError(f"truncated RESEND message at offset {at}")
    count = unpack(L.RESEND_BODY, buf, at)["count"]
    size = L.RESEND_BODY.end + L.aligned(2 * count)
    if left < size:
        raise CodecError(f"RESEND at offset {at} lists {count} packets past the end of the packet")
    return size


@functools.lru_cache(maxsize=1024)
def _decode_message(raw: bytes) -> Message:
    """One control message, whole (:func:`_message_size`), kept for the messages seen last:
    a receiver sends each again in every CONTROL packet until it is acknowledged (26 a
    packet decoded each time cost 54 us)."""
    prefix = unpack(L.MESSAGE, raw)
    seq, number = prefix["seq"], prefix["buffer"]
    if prefix["type"] == L.MessageType.GO:
        return Go(seq, number)
    if prefix["type"] == L.MessageType.OK:
        f = unpack(L.OK_BODY, raw)
        return Ok(seq, number, f["burst_size"], f["burst_interval"], f["control_timer"])
    count = unpack(L.RESEND_BODY, raw)["count"]
    return Resend(seq, number, struct.unpack_from(f">{count}H", raw, L.RESEND_BODY.end))
