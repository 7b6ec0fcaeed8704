"""A received file's pages leave the page cache as it is written (host/files.py FileSink)."""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
from pathlib import Path

import pytest

from netblt.host.announce import Announcement
from netblt.host.files import Expectation, FileSink

BUFFER = 16 * mmap.PAGESIZE
SPAN = 4 * BUFFER


def resident_pages(path: Path) -> int:
    """Pages of the file at ``path`` in the page cache: mincore(2) of a private mapping."""
    libc = ctypes.CDLL(None, use_errno=True)
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    vector = (ctypes.c_ubyte * pages)()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
        start = ctypes.c_char.from_buffer(mapped)
        try:
            if libc.mincore(ctypes.c_void_p(ctypes.addressof(start)), ctypes.c_size_t(size), vector):
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            del start
    return sum(byte & 1 for byte in vector)


def test_a_received_file_leaves_the_page_cache_as_it_is_written(tmp_path, monkeypatch):
    """Each span of UNCACHE_BYTES written starts its writeback and drops the span before
    it, so that a long transfer takes no more page cache than two spans (fresh pages cost
    a VM's host ten times what reused ones do: docs/benchmarks.md, issue 68)."""
    monkeypatch.setattr("netblt.host.files.UNCACHE_BYTES", SPAN)
    probe = tmp_path / "probe"
    probe.write_bytes(b"x" * mmap.PAGESIZE)
    with open(probe, "rb+") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if resident_pages(probe):
        pytest.skip("this file system keeps its pages in memory (tmpfs)")
    data = os.urandom(64 * BUFFER)
    announced = Announcement("f", len(data), hashlib.sha256(data).hexdigest())
    root = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    sink = FileSink(root, "f", Expectation(announced), BUFFER)
    try:
        for offset in range(0, len(data), BUFFER):
            sink.write(offset, memoryview(data)[offset:offset + BUFFER])
            os.fsync(sink.fd)  # its writeback done before the next write, as a disk keeping up has
        assert resident_pages(tmp_path / sink.partial) <= 2 * SPAN // mmap.PAGESIZE
        assert sink.problem() is None
        sink.commit()
    finally:
        os.close(root)
    assert (tmp_path / "f").read_bytes() == data
