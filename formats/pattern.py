"""The deterministic test pattern keyed by buffer number, defined once.

Buffer n's data is the byte stream of successive xorshift32 states (Marsaglia 2003),
each little-endian, starting from a seed derived from n. The gateware's generator and
checker (gateware/pattern.py), the board model, the software data path's C core
(driver/pattern.py) and the tests all derive from this. A transfer of the pattern keys
each buffer by its index in the transfer, so a file received is checked knowing only
its buffer size (host/check.py finds even that).
"""

from __future__ import annotations

SEED_MIX = 0x9E3779B9
MASK32 = 0xFFFF_FFFF


def seed(buffer: int) -> int:
    return (buffer ^ SEED_MIX) or SEED_MIX


def xorshift(x: int) -> int:
    x ^= (x << 13) & MASK32
    x ^= x >> 17
    x ^= (x << 5) & MASK32
    return x


def pattern_bytes(buffer: int, length: int) -> bytes:
    out, x = bytearray(), seed(buffer)
    while len(out) < length:
        x = xorshift(x)
        out += x.to_bytes(4, "little")
    return bytes(out[:length])
