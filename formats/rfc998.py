"""NETBLT (RFC 998) wire layouts, defined once as data.

Everything that reads or writes NETBLT bytes derives from these tables: the host codec,
the software data path's per-packet fast path, and the gateware header builder and
parser. Offsets are bytes from the start of the NETBLT header (the IP or UDP payload);
every multi-byte field is big-endian (reading A1 in docs/protocol.md).
"""

from __future__ import annotations

import enum

from .layout import sequential

VERSION = 2
"""RFC 998's version number (reading A3)."""

IP_PROTOCOL = 30
UDP_PROTOCOL = 17
"""The IP protocol numbers of NETBLT (assigned to it) and of UDP."""
ALIGNMENT = 4


class PacketType(enum.IntEnum):
    OPEN = 0
    RESPONSE = 1
    KEEPALIVE = 2
    QUIT = 3
    QUITACK = 4
    ABORT = 5
    DATA = 6
    LDATA = 7
    NULL_ACK = 8
    CONTROL = 9
    REFUSED = 10
    DONE = 11


class MessageType(enum.IntEnum):
    GO = 0
    OK = 1
    RESEND = 2


# Flag bits (reading A2): C and M in the OPEN/RESPONSE flags word, L in DATA/LDATA.
FLAG_DATA_CHECKSUM = 0x0002
FLAG_WRITE_MODE = 0x0001
FLAG_LAST_BUFFER = 0x0001

HEADER = sequential(
    "header", 0,
    ("checksum", 2), ("version", 1), ("type", 1), ("length", 2),
    ("local_port", 2), ("foreign_port", 2), ("pad", 2),
)
"""The 12-byte common header of every packet."""

OPEN = sequential(
    "open", HEADER.end,
    ("uid", 4), ("buffer_size", 4), ("transfer_size", 4), ("packet_size", 2),
    ("burst_size", 2), ("burst_interval", 2), ("death_timer", 2), ("flags", 2),
    ("max_buffers", 2),
)
"""OPEN and RESPONSE after the header; a NUL-padded client string follows."""

DATA = sequential(
    "data", HEADER.end,
    ("buffer", 4), ("high_ack", 2), ("packet", 2), ("data_checksum", 2), ("flags", 2),
)
"""DATA and LDATA after the header; the data area follows."""

NULL_ACK = sequential(
    "null_ack", HEADER.end,
    ("high_ack", 2), ("burst_size", 2), ("burst_interval", 2), ("pad", 2),
)

MESSAGE = sequential("message", 0, ("type", 1), ("pad", 1), ("seq", 2), ("buffer", 4))
"""The prefix of every control message; offsets are from the message start."""

OK_BODY = sequential(
    "ok", MESSAGE.end,
    ("burst_size", 2), ("burst_interval", 2), ("control_timer", 2), ("pad", 2),
)

RESEND_BODY = sequential("resend", MESSAGE.end, ("count", 2), ("pad", 2))
"""RESEND after the prefix; ``count`` 16-bit packet numbers follow, padded to 4 bytes."""

UDP = sequential("udp", 0, ("source_port", 2), ("dest_port", 2), ("length", 2), ("checksum", 2))
"""The UDP header in front of NETBLT in NETBLT-in-UDP mode (offsets from its own start); a
board sends checksum 0, as IPv4 allows."""

DATA_HEADER_SIZE = DATA.end
"""24: the span the DATA/LDATA header checksum covers (reading A13)."""

STRING_TYPES = frozenset({PacketType.QUIT, PacketType.ABORT, PacketType.REFUSED})
BARE_TYPES = frozenset({PacketType.KEEPALIVE, PacketType.QUITACK, PacketType.DONE})
EXACT_TYPES = BARE_TYPES | {PacketType.NULL_ACK}
"""Types whose Length is always their minimum."""

MIN_LENGTH = {
    PacketType.OPEN: OPEN.end + 4, PacketType.RESPONSE: OPEN.end + 4,
    **{kind: HEADER.end + 4 for kind in STRING_TYPES},
    **{kind: HEADER.end for kind in BARE_TYPES},
    PacketType.DATA: DATA.end, PacketType.LDATA: DATA.end,
    PacketType.NULL_ACK: NULL_ACK.end, PacketType.CONTROL: HEADER.end,
}
"""The shortest Length of each type: a string is at least its NUL, padded to 4 bytes."""


def aligned(n: int) -> int:
    """``n`` rounded up to the protocol's 4-byte alignment."""
    return (n + ALIGNMENT - 1) & ~(ALIGNMENT - 1)
