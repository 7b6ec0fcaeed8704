"""The test pattern's bytes, and the stamp source's, at memory speed, for the data paths,
the board's model and the checks that make or compare whole buffers of them:
driver/_fastpath.c writes them where the Makefile built it, else a Python loop does (some
100 times slower)."""

from __future__ import annotations

from ..formats.pattern import pattern_bytes, seed
from .compiled import fastpath


def pattern(key: int, length: int) -> bytearray:
    """Buffer ``key``'s first ``length`` bytes of the pattern."""
    out = bytearray(length)
    fill_pattern(memoryview(out), key)
    return out


def fill_pattern(out: memoryview, key: int) -> None:
    """Buffer ``key``'s pattern written over ``out`` in place (a slot's memory, uncopied)."""
    if fastpath is None:
        out[:] = pattern_bytes(key, len(out))
    else:
        fastpath.pattern(out, seed(key))


def stamps(first: int, every: int, length: int, beat: int = 4) -> bytearray:
    """``length`` bytes of the stamp source's words: ``first``, ``first + every``, ... (32
    bits, wrapping, little-endian) in the low bytes of each ``beat``-byte beat."""
    out = bytearray(length)
    if fastpath is None:
        for n, at in enumerate(range(0, length, beat)):
            word = ((first + n * every) & 0xFFFF_FFFF).to_bytes(4, "little")
            out[at:at + 4] = word[:length - at]
    else:
        fastpath.stamps(out, first & 0xFFFF_FFFF, every, beat)
    return out


def first_difference(expected: bytes | bytearray | memoryview, got: bytes | bytearray | memoryview) -> int | None:
    """The first offset where ``got`` differs from ``expected`` (or ends before it)."""
    if expected == got:
        return None
    return next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
