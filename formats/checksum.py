"""The Internet checksum (RFC 1071) as RFC 998 uses it: no pseudo-header (reading A13)."""

from __future__ import annotations


def ones_complement_sum(data: bytes | bytearray | memoryview) -> int:
    """The 16-bit ones'-complement sum of ``data`` as big-endian words.

    An odd trailing byte is padded with a zero byte for the sum only. Because
    2**16 is 1 modulo 0xFFFF, the sum of the words equals the whole buffer read as one
    big integer, modulo 0xFFFF; Python does that in C, which keeps this fast enough for
    the software data path.
    """
    value = int.from_bytes(data, "big")
    if len(data) % 2:
        value <<= 8
    folded = value % 0xFFFF
    # A non-zero buffer whose words sum to a multiple of 0xFFFF has the sum 0xFFFF
    # ("negative zero"); only an all-zero buffer sums to 0.
    return 0xFFFF if folded == 0 and value else folded


def internet_checksum(data: bytes | bytearray | memoryview) -> int:
    """The bit-inverted ones'-complement sum: the value to put in a checksum field."""
    return ~ones_complement_sum(data) & 0xFFFF
