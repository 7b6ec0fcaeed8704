"""The management link's packet: register reads and writes carried in one UDP datagram.

A request is a 32-bit tag, which the reply echoes, then up to ``MAX_OPERATIONS``
operations of 8 bytes: opcode, register address, two zero bytes, a 32-bit value. The
board executes a request only once all of it has arrived intact, in order, and answers
with the same datagram: each executed operation's opcode gains ``DONE`` and a read's
value is what was read. An unknown opcode comes back without ``DONE``. Multi-byte
fields are big-endian. Requests must carry a UDP checksum (every socket stack sends
one); replies carry one too. gateware/management.py is the board's side of this format.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

MANAGEMENT_PORT = 2990
"""The board's UDP port for management requests (a build-time setting)."""
TAG_BYTES = 4
OPERATION_BYTES = 8
MAX_OPERATIONS = 62
"""So a request (UDP header, tag, operations) fits the board's 128-word buffer."""
DONE = 0x80


class Opcode(enum.IntEnum):
    WRITE = 1
    READ = 2
    DROPPED = 3
    """Read the management block's own count of requests it dropped (malformed, cut
    short, failing the frame check, or arriving while it was busy)."""


@dataclass(frozen=True)
class Operation:
    opcode: Opcode
    address: int
    value: int = 0


class ManagementError(ValueError):
    pass


_OPERATION = struct.Struct(">BBxxI")


def encode_request(tag: int, operations: list[Operation]) -> bytes:
    if not 1 <= len(operations) <= MAX_OPERATIONS:
        raise ManagementError(f"a request carries 1..{MAX_OPERATIONS} operations, not {len(operations)}")
    body = [struct.pack(">I", tag)]
    for op in operations:
        if not (0 <= op.address < 256 and 0 <= op.value < 1 << 32):
            raise ManagementError(f"operation out of range: {op}")
        body.append(_OPERATION.pack(op.opcode, op.address, op.value))
    return b"".join(body)


def decode_reply(reply: bytes, request: bytes) -> list[int]:
    """Each operation's value from the reply to ``request``; raises if any was not done."""
    if len(reply) != len(request) or reply[:TAG_BYTES] != request[:TAG_BYTES]:
        raise ManagementError("reply does not answer this request (length or tag differs)")
    values = []
    for offset in range(TAG_BYTES, len(reply), OPERATION_BYTES):
        opcode, address, value = _OPERATION.unpack_from(reply, offset)
        asked, asked_address, _ = _OPERATION.unpack_from(request, offset)
        if opcode != asked | DONE or address != asked_address:
            raise ManagementError(f"operation {asked:#x} on register {asked_address} was not done")
        values.append(value)
    return values
