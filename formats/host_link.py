"""The host link's datagrams (docs/host-link.md), defined once, as data.

The host's client (driver/link.py) and the board's link block (gateware) both derive
from these layouts: field offsets and widths are never typed anywhere else. The
datagram tables of docs/host-link.md are generated here too:
``python -m netblt.formats.host_link`` prints them.
"""

from __future__ import annotations

import enum
import operator
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from .layout import Layout, sequential

LINK_PORT = 2990
"""The board's UDP port for the host link (a build option)."""
VERSION = 1
WINDOW = 32
"""Replies the board keeps for replay, and so requests a host may have in flight: 32
full 1500-byte UPLOADs cover a 200 us host-board round trip at a gigabit with room to
spare (16 would carry 0.9 Gb/s)."""
EVENTS_PER_PUSH = 248
"""EVENT words in one push at most; room is left for control packets after them."""
PUSH_WORDS = 768
"""The most words one push holds, its link header included (the board's store keeps it
until acknowledged): EVENTS_PER_PUSH events and a control FIFO's 512 words at least."""
PUSH_LEAST = 137
"""The least a host may set PUSH_LIMIT to (an IPv4 datagram of 576 bytes); less counts as this."""
MAX_OPERATIONS = 30
"""Register operations in one request: its reply, two words each after the link header,
must fit the board's stored reply of 64 words (one for each ID in the window)."""
IP_UDP_HEADERS = 28
"""IPv4 and UDP headers around every datagram."""
DOWNLOAD_PARTS = 44
"""Reply datagrams one DOWNLOAD asks for at most: at 1500 bytes a datagram carries 1,456
bytes of slot memory, and a request each would be as many datagrams out as in; a
receiving host wakes about once a request's replies (8 a request woke it twice as often
as 32), and 44 of 1,500 bytes are the most the kernel joins into one read (64 KB).
The compiled run's bitmap of a request's replies holds 64."""
DOWNLOAD_MOST = 0xFFFF
"""Words one DOWNLOAD reads at most (the board keeps the count for replay in 16 bits):
more reads this many."""
PART_MOST = 4091
"""Words one DOWNLOAD reply carries at most (the board's sender counts a datagram's words
in 12 bits, its link header's four among them): more come in parts of this many."""

HEADER = sequential(
    "link header", 0,
    ("version", 1), ("type", 1), ("status", 1), ("flags", 1), ("id", 2), ("ack", 2),
    ("session", 4), ("value", 4),
)
OPERATION = sequential("operation", 0, ("opcode", 1), ("register", 1), ("pad", 2), ("value", 4))
"""A REGISTERS request's operation; its reply's has DONE in the opcode and read values."""
CONTROL_RECORD = sequential("control record", 0, ("length", 4), ("address", 4), ("port", 4))
"""An EVENTS record holding a received control packet (bit 31 of ``length`` clear; an
EVENT word has it set); the packet follows, padded to 4 bytes."""
CONTROL_MOST = 4 * (PUSH_WORDS - HEADER.end // 4 - EVENTS_PER_PUSH - CONTROL_RECORD.end // 4)
"""Bytes of the longest control packet a push carries after its most events (the
board's control FIFO must hold no longer one: hw/node.py)."""


class Type(enum.IntEnum):
    OPEN = 1
    STATUS = 2
    REGISTERS = 3
    UPLOAD = 4
    DOWNLOAD = 5
    ACK = 6
    EVENTS = 7
    RESEND = 8
    """Send the stored reply to request ``id`` again (never executes anything)."""


REPLY = 0x80
"""Added to a request's type in its reply."""


class Status(enum.IntEnum):
    OK = 0
    NOT_OWNER = 1
    """Another host owns the session (or this one may not take it over yet)."""
    NO_SESSION = 2
    """The session named is not the board's: the board was reset or reloaded, or taken over."""
    OUT_OF_WINDOW = 3
    """The ID is neither the next one nor one of the last few: ``ack`` says which is next."""
    MALFORMED = 4


class Opcode(enum.IntEnum):
    WRITE = 1
    READ = 2


DONE = 0x80
FLAG_TAKE_OVER = 0x01
FLAG_QUIET = 0x02
"""UPLOAD, REGISTERS: no reply when it runs (it is kept for replay all the same). The board
runs requests in ID order only, so a later datagram's ``ack`` past it (a reply's, or a
push's) says this one ran: a host asks for one reply in several, a cable carries fewer
small datagrams, and a buffer's upload and SEND wake the host for none (the board's
push of the slot's SENT event says they ran)."""
EVENT_BIT = 1 << 31
"""Set in an EVENT word; clear in a control record's first word."""


class FormatError(ValueError):
    """A datagram that is not a host-link datagram; the message says why."""


class Header(NamedTuple):
    type: int
    id: int = 0
    session: int = 0
    ack: int = 0
    value: int = 0
    status: int = Status.OK
    flags: int = 0
    version: int = VERSION


_in_wire_order = operator.attrgetter(*HEADER.names)
_from_wire_order = [HEADER.names.index(name) for name in Header._fields]
"""Header's fields in the layout's order, and back: every datagram is encoded or decoded
with one struct call."""


def encode(header: Header, body: bytes = b"") -> bytes:
    return HEADER.struct.pack(*_in_wire_order(header)) + body


def decode(datagram: bytes | memoryview) -> tuple[Header, memoryview]:
    view = memoryview(datagram)
    if len(view) < HEADER.end:
        raise FormatError(f"{len(view)} bytes: a host-link datagram has a {HEADER.end}-byte header")
    fields = HEADER.struct.unpack_from(view)
    header = Header._make([fields[at] for at in _from_wire_order])
    if header.version != VERSION:
        raise FormatError(f"host-link version {header.version}, expected {VERSION}")
    return header, view[HEADER.end:]


class Operation(NamedTuple):
    opcode: int
    register: int
    value: int = 0


_OPERATIONS = [struct.Struct(">" + OPERATION.struct.format.lstrip("<>!=@") * n) for n in range(MAX_OPERATIONS + 1)]
"""A request's operations packed in one call: a RESEND of 15 packets is 30 of them."""


def encode_operations(operations: list[Operation]) -> bytes:
    if not 1 <= len(operations) <= MAX_OPERATIONS:
        raise FormatError(f"a request carries 1..{MAX_OPERATIONS} operations, not {len(operations)}")
    return _OPERATIONS[len(operations)].pack(*[f for op in operations for f in (op.opcode, op.register, 0, op.value)])


def word_writes(register: int, data: bytes) -> bytes:
    """Operations writing ``data`` to ``register`` a 32-bit word at a time, each word's
    first byte in its bits 7:0 (the engine's lanes), the last padded with zeros: the
    same bytes as :func:`encode_operations` of a WRITE a word, made by a few slice copies
    (a control packet of 548 bytes took 82 us an operation at a time)."""
    padded = bytes(data) + bytes(-len(data) % 4)
    count, step = len(padded) // 4, OPERATION.end
    out = bytearray(step * count)
    out[OPERATION.field("opcode").offset::step] = bytes([Opcode.WRITE]) * count
    out[OPERATION.field("register").offset::step] = bytes([register]) * count
    value = OPERATION.field("value").offset
    for byte in range(4):  # the value is big-endian in the operation, the word little-endian
        out[value + byte::step] = padded[3 - byte::4]
    return bytes(out)


def decode_operations(body: bytes | memoryview) -> list[Operation]:
    if len(body) % OPERATION.end:
        raise FormatError(f"operations of {len(body)} bytes are not whole {OPERATION.end}-byte operations")
    return [Operation(opcode, register, value) for opcode, register, _, value
            in OPERATION.struct.iter_unpack(body)]


def writes_only(body: bytes) -> bool:
    """A REGISTERS request's body of WRITE operations alone (a reply to it says only that
    it ran)."""
    return bool(body) and not len(body) % OPERATION.end and \
        body[_OPCODE::OPERATION.end].count(Opcode.WRITE) == len(body) // OPERATION.end


def done_operations(body: bytes) -> bytes | None:
    """The reply the board gives a REGISTERS request of writes alone, each operation DONE
    with the value it wrote (a quiet one's, answered by a later ``ack``); None where any
    operation reads (its value is only in the board's reply) or the body is not one."""
    if not writes_only(body):
        return None
    reply = bytearray(body)
    reply[_OPCODE::OPERATION.end] = bytes([Opcode.WRITE | DONE]) * (len(body) // OPERATION.end)
    return bytes(reply)


_OPCODE = OPERATION.field("opcode").offset


def words(body: bytes | memoryview) -> list[int]:
    if len(body) % 4:
        raise FormatError(f"{len(body)} bytes are not whole words")
    return [w for (w,) in struct.iter_unpack(">I", body)]


@dataclass(frozen=True)
class ControlPacket:
    """A NETBLT packet the board received that is not DATA, with its IPv4 source."""

    address: int
    port: int
    packet: bytes


def encode_events(events: list[int], packets: list[ControlPacket]) -> bytes:
    """An EVENTS push's body: the EVENT words, then each control packet's record."""
    out = [struct.pack(f">{len(events)}I", *events)]
    for p in packets:
        out += [CONTROL_RECORD.struct.pack(len(p.packet), p.address, p.port), p.packet,
                bytes(-len(p.packet) % 4)]
    return b"".join(out)


def decode_events(body: bytes | memoryview) -> tuple[list[int], list[ControlPacket]]:
    """An EVENTS push's EVENT words and control packets, in order within each kind."""
    view = memoryview(body)
    events, packets, at = [], [], 0
    record = CONTROL_RECORD.struct
    while at < len(view):
        if len(view) - at < 4:
            raise FormatError(f"a record cut short at byte {at}")
        (first,) = struct.unpack_from(">I", view, at)
        if first & EVENT_BIT:
            events.append(first)
            at += 4
            continue
        if len(view) - at < record.size:
            raise FormatError(f"a control record cut short at byte {at}")
        length, address, port = record.unpack_from(view, at)
        end = at + record.size + (length + 3 & ~3)
        if length > 0xFFFF or end > len(view):
            raise FormatError(f"a control record of {length} bytes runs past the push")
        packets.append(ControlPacket(address, port & 0xFFFF, bytes(view[at + record.size:at + record.size + length])))
        at = end
    return events, packets


def max_words(mtu: int) -> int:
    """Words of slot memory one UPLOAD or DOWNLOAD moves at this MTU."""
    return (mtu - IP_UDP_HEADERS - HEADER.end) // 4


def push_limit(mtu: int) -> int:
    """PUSH_LIMIT for a host link of this MTU: the words of its largest datagram."""
    return (mtu - IP_UDP_HEADERS) // 4


def push_room(limit: int) -> tuple[int, int]:
    """What a push may hold under PUSH_LIMIT ``limit``: (words in all, events at most).
    Control packets join it, in the order they came, while the push stays within its
    words; the first goes whatever its size, so that none waits for ever."""
    words = min(PUSH_WORDS, max(PUSH_LEAST, limit))
    return words, min(EVENTS_PER_PUSH, words - HEADER.end // 4)


def record_words(length: int) -> int:
    """Words a control packet of ``length`` bytes takes in a push: its record and itself."""
    return CONTROL_RECORD.end // 4 + (length + 3) // 4


Requests = list[tuple[Type, bytes, int]]
"""(type, body, value) of each request, as LinkClient.submit takes them."""


def download_body(words: int, step: int) -> bytes:
    """A DOWNLOAD's body: ``words`` to read, in replies of ``step`` words (one reply when
    ``step`` covers them all)."""
    return struct.pack(">I", words) if words <= step else struct.pack(">II", words, step)


def download_parts(body: bytes | memoryview) -> tuple[int, int] | None:
    """A DOWNLOAD's (words, words a reply), or None where its body is not one. A second
    word of 0, or of the words or more, asks for one reply (as the board has them: at
    most DOWNLOAD_MOST words, in replies of PART_MOST at most)."""
    if len(body) not in (4, 8):
        return None
    words, step = (*struct.unpack(">I", body), 0) if len(body) == 4 else struct.unpack(">II", body)
    words = min(words, DOWNLOAD_MOST)
    return words, min(PART_MOST, step if 0 < step < words else words)


class BulkRequests:
    """The requests that move ``data`` into transmit slot memory (UPLOAD) or receive slot
    memory into it (DOWNLOAD) from ``word_address`` on, ``step`` words each (the last
    fewer; an upload padded to whole words; a DOWNLOAD ``parts`` such steps, a reply
    datagram each), after one REGISTERS request with the body ``first`` and before one
    with the body ``last``, each if given: request ``index`` as (type, body, value), as
    LinkClient.submit takes it, built when asked for."""

    def __init__(self, kind: Type, word_address: int, data: memoryview, step: int, first: bytes | None = None,
                 parts: int = 1, last: bytes | None = None):
        self.kind, self.word_address, self.data, self.step = kind, word_address, data, step
        self.stride = step * (parts if kind == Type.DOWNLOAD else 1)
        """Words each request moves."""
        self.first, self.last = first or b"", last or b""
        self.lead, self.tail = int(first is not None), int(last is not None)

    def __len__(self) -> int:
        return self.lead + self.tail - (-len(self.data) // (4 * self.stride))

    def kept(self) -> BulkRequests:
        """The same requests over a copy of the data (its owner may reuse the buffer while
        they are still to be answered, and a recovery sends them again)."""
        return BulkRequests(self.kind, self.word_address, memoryview(bytes(self.data)), self.step,
                            self.first if self.lead else None, self.stride // self.step,
                            self.last if self.tail else None)

    def __iter__(self) -> Iterator[tuple[Type, bytes, int]]:
        return (self[index] for index in range(len(self)))

    def offset(self, index: int) -> int:
        """Where request ``index``'s data starts in ``data`` (or ends, past the last)."""
        return min(len(self.data), 4 * self.stride * max(0, index - self.lead))

    def __getitem__(self, index: int) -> tuple[Type, bytes, int]:
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index < self.lead:
            return Type.REGISTERS, self.first, 0
        if self.tail and index == len(self) - 1:
            return Type.REGISTERS, self.last, 0
        at = self.offset(index)
        value = self.word_address + at // 4
        if self.kind == Type.UPLOAD:
            body = bytes(self.data[at:at + 4 * self.step])
            return Type.UPLOAD, body + bytes(-len(body) % 4), value
        words = min(self.stride, -(-(len(self.data) - at) // 4))
        return Type.DOWNLOAD, download_body(words, self.step), value


def upload_requests(word_address: int, data: bytes, mtu: int) -> Requests:
    """UPLOADs of ``data`` from ``word_address`` on, each as large as the MTU allows."""
    return list(BulkRequests(Type.UPLOAD, word_address, memoryview(data), max_words(mtu)))


def download_requests(word_address: int, size: int, mtu: int, parts: int = 1) -> Requests:
    """DOWNLOADs of ``size`` bytes from ``word_address`` on, each reply as large as the MTU
    allows, ``parts`` replies a request; their bodies joined, cut to ``size``, are the data."""
    return list(BulkRequests(Type.DOWNLOAD, word_address, memoryview(bytes(size)), max_words(mtu), parts=parts))


HEADER_DOCS = {
    "version": str(VERSION),
    "type": f"what the datagram is (below); a reply is its request's type + 0x{REPLY:02x}",
    "status": "replies: " + ", ".join(status.name for status in Status),
    "flags": f"OPEN: bit {FLAG_TAKE_OVER.bit_length() - 1} TAKE_OVER; "
             f"UPLOAD, REGISTERS: bit {FLAG_QUIET.bit_length() - 1} QUIET (no reply when it runs; a replay still answers)",
    "id": "the request's packet ID (a reply's is its request's); EVENTS: the push's number",
    "ack": "from the host: the highest EVENTS number it holds; from the board: the next request ID it expects",
    "session": "the session the host opened; the board's replies carry the board's own (0: none)",
    "value": "UPLOAD/DOWNLOAD: a word address in slot memory (a DOWNLOAD's reply: that of its first word)",
}


def _fields(layout: Layout) -> str:
    """``opcode, register, 2 zero bytes, value``: a layout's fields in words."""
    return ", ".join(f"{f.width} zero bytes" if f.name.startswith("pad") else f.name for f in layout.fields)


TYPE_DOCS = {
    Type.OPEN: ("host", "none", "three words: the owner's IPv4 address, its port, and milliseconds since the board "
                                "last heard it (on NOT_OWNER: who holds the board)"),
    Type.STATUS: ("anyone", "none", "a snapshot of every register that does not pop"),
    Type.REGISTERS: ("owner", f"up to {MAX_OPERATIONS} operations of {OPERATION.end} bytes: {_fields(OPERATION)} "
                              f"(opcode {', '.join(f'{o.value} {o.name}' for o in Opcode)})",
                     f"the operations, DONE (0x{DONE:02x}) set in each opcode, read values filled in"),
    Type.UPLOAD: ("owner", "the words to write into transmit slot memory from `value` on",
                  "none (an acknowledgement, not an echo)"),
    Type.DOWNLOAD: ("owner", f"one word: how many words to read from receive slot memory at `value` (at most "
                             f"{DOWNLOAD_MOST}); or two: that, and how many a reply datagram carries (fewer)",
                    "the words, or with two words their parts: a reply datagram each, in order"),
    Type.ACK: ("owner", "none", "no reply: `ack` alone matters"),
    Type.EVENTS: ("board", f"records: an EVENT word (bit {EVENT_BIT.bit_length() - 1} set), or a control packet: "
                           f"{_fields(CONTROL_RECORD)} (bit {EVENT_BIT.bit_length() - 1} of length clear), then the "
                           "packet padded to 4 bytes", "the host answers with `ack`"),
    Type.RESEND: ("owner", "none", "the stored reply to request `id`, again"),
}
"""Who sends each type, its body and its reply's body."""


def markdown() -> str:
    """docs/host-link.md's datagram tables."""
    lines = [f"UDP to the board's link port ({LINK_PORT}, a build option), every multi-byte field big-endian.",
             f"Every datagram starts with the same {HEADER.end}-byte header:", "",
             "| offset | bytes | field | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| {f.offset} | {f.width} | {f.name} | {HEADER_DOCS[f.name]} |" for f in HEADER.fields]
    lines += ["", "| type | number | from | body | reply body |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {t.name} | {t.value} | {sender} | {body} | {reply} |"
              for t, (sender, body, reply) in TYPE_DOCS.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
