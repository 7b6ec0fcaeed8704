"""The test pattern's bytes at memory speed, for the data paths and the checks that make
or compare whole buffers of it: driver/_fastpath.c writes them where the Makefile built
it, else formats/pattern.py's Python loop does (some 100 times slower)."""

from __future__ import annotations

from ..formats.pattern import pattern_bytes, seed

try:
    from . import _fastpath as fastpath
except ImportError:  # not built
    fastpath = None


def pattern(key: int, length: int) -> bytearray:
    """Buffer ``key``'s first ``length`` bytes of the pattern."""
    if fastpath is None:
        return bytearray(pattern_bytes(key, length))
    out = bytearray(length)
    fastpath.pattern(out, seed(key))
    return out


def first_difference(expected: bytes | bytearray | memoryview, got: bytes | bytearray | memoryview) -> int | None:
    """The first offset where ``got`` differs from ``expected`` (or ends before it)."""
    if expected == got:
        return None
    return next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
