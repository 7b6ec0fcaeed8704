"""``netblt check``: is a received file the test pattern, and from where is it not?

A transfer of the pattern (``netblt send --source pattern``) keys each buffer by its
index, so the file is buffer 0's pattern, then buffer 1's, and so on. The buffer size is
found from the file itself where it is not given: buffer 0's pattern runs until buffer
1's begins, and a 4-byte state of the generator matches by chance once in 2**32.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..driver.pattern import first_difference, pattern
from .files import CHUNK, FileError, PatternCheck

LOOK = 64 << 20
"""The longest buffer looked for: more than any slot or the receiver's 16 MiB limit."""
CONFIRM = 64
"""Bytes of buffer 1's pattern that must follow where buffer 0's ends."""


@dataclass
class Verdict:
    path: str
    size: int
    buffer_size: int
    wrong: int | None
    """The offset of the first byte that is not the pattern."""

    @property
    def ok(self) -> bool:
        return self.wrong is None

    def text(self) -> str:
        if self.size == 0:
            return f"{self.path}: empty"
        buffers = -(-self.size // self.buffer_size)
        shape = f"{self.size} bytes in {buffers} buffer{'s' * (buffers > 1)} of {self.buffer_size}"
        if self.ok:
            return f"{self.path}: the test pattern, {shape}: every byte matches"
        key, at = divmod(self.wrong, self.buffer_size)
        return f"{self.path}: {shape}: not the test pattern from byte {self.wrong} on (buffer {key}, its byte {at})"

    def as_json(self) -> dict:
        return {"path": self.path, "ok": self.ok, "bytes": self.size, "buffer_size": self.buffer_size,
                "first_wrong_byte": self.wrong}


def check(path: str, buffer_size: int | None = None, progress=lambda done, total: None) -> Verdict:
    """Check the file at ``path``; FileError if it cannot be read, or (without
    ``buffer_size``) if no buffer size makes its start the pattern."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise FileError(f"cannot read {path}: {exc.strerror}") from None
    try:
        size = os.fstat(fd).st_size
        buffer_size = buffer_size or _buffer_size(fd, size, path)
        checking = PatternCheck(buffer_size)
        for at in range(0, size, CHUNK):
            checking.update(at, os.pread(fd, CHUNK, at))
            progress(min(size, at + CHUNK), size)
            if checking.wrong is not None:
                break
        return Verdict(path, size, buffer_size, checking.wrong)
    except OSError as exc:
        raise FileError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _buffer_size(fd: int, size: int, path: str) -> int:
    """Where buffer 0's pattern gives way to buffer 1's (the whole file if it never does)."""
    start = os.pread(fd, min(size, LOOK), 0)
    ends = first_difference(pattern(0, len(start)), start)
    if ends is None and size > LOOK:
        raise FileError(f"{path}: its first {LOOK >> 20} MiB are all buffer 0's pattern; give --buffer-size")
    if ends is None:
        return max(1, size)
    for length in range(ends, max(0, ends - 3) - 1, -1):  # buffer 1 may begin with a byte or three alike
        if length and os.pread(fd, CONFIRM, length) == pattern(1, min(CONFIRM, size - length)):
            return length
    raise FileError(f"{path} is not the test pattern: it differs from byte {ends} on, where no "
                    f"buffer begins (give --buffer-size if its buffers were that size)")
