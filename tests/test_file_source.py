"""A file as a sender reads it: its data, then the trailer with the SHA-256 a thread
computed meanwhile (host/files.py FileSource)."""

import hashlib
import os
import random

import pytest

from netblt.host.files import TRAILER, TRAILER_MAGIC, FileSource, InOrder


def buffers(source: FileSource, size: int) -> list[tuple[bytes, bool]]:
    out = []
    while (found := source.buffer(len(out), size)) is not None:
        out.append(found)
    return out


@pytest.mark.parametrize("length", [0, 1, 4096 - TRAILER.size - 10, 4096 - TRAILER.size, 4096, 3 * 4096 + 5])
@pytest.mark.parametrize("sealed", [False, True])
def test_the_data_then_its_trailer_in_buffers_the_last_one_marked(tmp_path, length, sealed):
    """Whatever buffer the data ends in, the trailer follows it (across two buffers if it
    must), and only the buffer that holds the trailer's last byte says it is the last."""
    data = os.urandom(length)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    seal = (lambda digest: hashlib.sha256(b"key" + digest).digest()) if sealed else None
    source = FileSource(path, seal)
    try:
        got = buffers(source, 4096)
        digest = hashlib.sha256(data).digest()
        trailer = TRAILER.pack(TRAILER_MAGIC, length, digest) + (seal(digest) if seal else b"")
        assert b"".join(d for d, _ in got) == data + trailer
        assert [last for _, last in got] == [False] * (len(got) - 1) + [True]
        assert source.size == len(data + trailer) and source.length == length
        assert source.sha256 == digest.hex()
    finally:
        source.close()


def test_a_released_buffers_memory_holds_the_next_and_one_asked_again_keeps_its_own(tmp_path):
    """Buffers go into the memory of ones released (fresh memory a buffer cost a page fault
    every 4 KiB); a buffer asked for again before its release (the first, loaded ahead of
    the OPEN's answer) is read into its own memory again, never into another's."""
    data = os.urandom(5 * 4096)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    source = FileSource(path)
    try:
        first, _ = source.buffer(0, 4096)
        again, _ = source.buffer(0, 4096)
        second, _ = source.buffer(1, 4096)
        assert again.obj is first.obj and second.obj is not first.obj
        assert bytes(first) == data[:4096] and bytes(second) == data[4096:8192]
        source.release(0)
        third, _ = source.buffer(2, 4096)
        assert third.obj is first.obj and bytes(third) == data[8192:12288]
        assert bytes(second) == data[4096:8192]  # not released: untouched
        shorter, _ = source.buffer(1, 3000)  # other sizes (the RESPONSE shrank the buffers): memory of their own
        assert bytes(shorter) == data[3000:6000] and shorter.obj is not second.obj
    finally:
        source.close()


def test_closing_stops_the_hash_at_once(tmp_path):
    """A transfer that ends early (refused, interrupted) does not wait for a large file's
    digest: closing stops the hashing thread after the chunk it is in."""
    path = tmp_path / "sparse.bin"
    with open(path, "wb") as f:
        f.truncate(4 << 30)  # 4 GiB of holes: about 2.5 s of hashing
    source = FileSource(path)
    source.close()
    assert not source._hasher.is_alive() and source.hashed_bytes < 4 << 30


def test_a_file_that_shrinks_while_hashed_fails_when_its_trailer_is_due(tmp_path):
    """The sender then quits with the reason (protocol/endpoint.py), instead of a digest of
    less than it announced."""
    path = tmp_path / "sparse.bin"
    with open(path, "wb") as f:
        f.truncate(4 << 30)
    source = FileSource(path)
    try:
        os.truncate(path, 1 << 20)  # long before 4 GiB are hashed
        with pytest.raises(OSError, match="changed size while being read"):
            source.trailer()
    finally:
        source.close()


@pytest.mark.parametrize("seed", range(20))
def test_the_receiver_holds_back_exactly_the_trailer_however_the_data_comes(seed):
    """In order, in pieces of any size (shorter than the trailer too), out of order: the
    data reaches the hash whole and once, the trailer never does."""
    rng = random.Random(seed)
    data = rng.randbytes(rng.randrange(0, 3000))
    trailer = TRAILER.pack(TRAILER_MAGIC, len(data), hashlib.sha256(data).digest())
    whole = data + trailer
    cuts = sorted(rng.sample(range(1, len(whole)), min(len(whole) - 1, rng.randrange(0, 12))))
    pieces = [(a, whole[a:b]) for a, b in zip([0] + cuts, cuts + [len(whole)])]
    rng.shuffle(pieces)
    consumed = []
    order = InOrder(lambda d: consumed.append(bytes(d)), hold=TRAILER.size)
    for offset, piece in pieces:
        order.add(offset, memoryview(piece))
    assert b"".join(consumed) == data and order.held_back == trailer
