"""Files as transfer sources and sinks, and the end-to-end SHA-256 that checks them.

A sender announces each file's size and modification time in its OPEN
(host/announce.py) and sends its data followed by a trailer with its length and SHA-256
(and, with a shared secret, their MAC): the file is hashed while it is sent, so a large
file's first buffer does not wait for its digest. A stream (a pipe, or ``-`` for
standard input) is sent the same way, with no size up front. The receiver hashes the
data in file order as buffers are delivered, checks it against the trailer at the end
and never writes the trailer out.

The receiver writes ``<name>.partial`` inside its output directory only, and renames it
only when verified; it never replaces an existing file unless told to. Beside the
partial file, ``<name>.partial.resume`` records which buffers are written and synced,
so an interrupted transfer of the same file (same size and modification time) sends
only the rest; the trailer's digest still checks the whole, so a file changed in place
with both kept fails its check rather than splicing old data into new.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import stat
import struct
import threading
import time
import unicodedata
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from ..driver.pattern import first_difference, pattern, stamps
from ..formats.born import DrainedBuffer, PatternBuffer, TakenBuffer
from .announce import PATTERN, STAMPS, Announcement

CHUNK = 1 << 20
SPARE_BUFFERS = 4
"""Released buffers a file source keeps for the next: with buffers released as OKs come,
one or two are waiting at a time."""
MAX_NAME = 1024
"""Bytes of UTF-8 in a name, all components together."""
RECORD_INTERVAL = 1.0
"""Seconds between updates of a resume record while data arrives."""
UNCACHE_BYTES = 8 << 20
"""Bytes a file sink writes between its advice to the page cache (:meth:`FileSink._uncache`)."""
TRAILER = struct.Struct(">8sQ32s")
TRAILER_MAGIC = b"nbltEND1"
MAC_SIZE = 32


class FileError(Exception):
    """A file that cannot be sent or written; the message is one line for the user."""


def name_problem(name: str) -> str | None:
    """Why a receiver refuses to write ``name`` (a relative, ``/``-separated path), or None."""
    if not name:
        return "an empty name"
    if len(name.encode()) > MAX_NAME:
        return f"longer than {MAX_NAME} bytes"
    if name.startswith("/"):
        return "an absolute path"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return "a path that could leave the output directory"
        if part.startswith("."):
            return "a hidden file or directory"
        if any(unicodedata.category(c).startswith("C") for c in part):
            return "control or unassigned characters"
        if len(part.encode()) > 255:
            return "a component longer than 255 bytes"
    return None


def trailer_size(sealed: bool) -> int:
    return TRAILER.size + (MAC_SIZE if sealed else 0)


# -- sources --------------------------------------------------------------------------------


class FileSource:
    """A regular file: its size and modification time are known before the OPEN; its
    SHA-256 is computed by a thread while the data goes out, and follows the data in the
    trailer. ``size`` is what the transfer carries: the data and the trailer.

    Each buffer is read into memory a released buffer of the same size held before: a
    fresh allocation a buffer cost the sender a page fault and a zeroed page every 4 KiB
    (a seventh of an offloaded sender's CPU)."""

    def __init__(self, path: str | os.PathLike, seal: Callable[[bytes], bytes] | None = None) -> None:
        self.path = Path(path)
        self.fd = _open_for_reading(self.path)
        status = os.fstat(self.fd)
        self.length, self.modified = status.st_size, status.st_mtime_ns
        self.size = self.length + trailer_size(seal is not None)
        self.seal = seal
        self._hash = hashlib.sha256()
        self._hash_error: OSError | None = None
        self.hashed_bytes = 0
        self._stop = threading.Event()
        self._hasher = threading.Thread(target=self._hash_all, name=f"sha256 {self.path.name}", daemon=True)
        self._hasher.start()
        self._trailer: bytes | None = None
        self._held: dict[int, bytearray] = {}
        """The memory of each buffer handed out and not yet released, by index."""
        self._spare: list[bytearray] = []

    @property
    def sha256(self) -> str:
        """The data's SHA-256 once hashed (by the time the trailer went out), else empty."""
        return self._hash.hexdigest() if self._trailer is not None else ""

    def buffer(self, index: int, size: int) -> tuple[memoryview, bool] | None:
        start = index * size
        if start >= self.size:
            return None
        end = min(start + size, self.size)
        in_file = max(0, min(end, self.length) - start)
        data = memoryview(self._memory(index, end - start))
        if in_file and os.preadv(self.fd, [data[:in_file]], start) != in_file:
            raise OSError(errno.EIO, f"{self.path} is shorter than when it was announced")
        if end > self.length:
            data[in_file:] = self.trailer()[max(start, self.length) - self.length:end - self.length]
        return data, end == self.size

    def _memory(self, index: int, length: int) -> bytearray:
        """Room for buffer ``index``: what it had (the same bytes asked for again), or a
        released buffer's of that length, or new."""
        held = self._held.get(index)
        if held is None or len(held) != length:
            held = next((spare for spare in self._spare if len(spare) == length), None)
            if held is None:
                held = bytearray(length)
            else:
                self._spare.remove(held)
            self._held[index] = held
        return held

    def trailer(self) -> bytes:
        """Magic, length, SHA-256 (and its seal), once hashing is done."""
        if self._trailer is None:
            self._hasher.join()
            if self._hash_error is not None:
                raise self._hash_error
            digest = self._hash.digest()
            self._trailer = TRAILER.pack(TRAILER_MAGIC, self.length, digest) + (self.seal(digest) if self.seal else b"")
        return self._trailer

    def _hash_all(self) -> None:
        chunk = memoryview(bytearray(CHUNK))
        try:
            while not self._stop.is_set() and (got := os.preadv(self.fd, [chunk], self.hashed_bytes)):
                self._hash.update(chunk[:got])  # hashlib lets other threads run meanwhile
                self.hashed_bytes += got
            if self.hashed_bytes != self.length and not self._stop.is_set():
                raise OSError(errno.EIO, f"{self.path} changed size while being read ({self.length} -> "
                                         f"{self.hashed_bytes} bytes)")
        except OSError as exc:
            self._hash_error = exc  # the sender reports it when the trailer is due

    def release(self, index: int) -> None:
        """Buffer ``index`` is delivered: its memory holds the next."""
        held = self._held.pop(index, None)
        if held is not None and len(self._spare) < SPARE_BUFFERS:
            self._spare.append(held)

    def close(self) -> None:
        """Stop hashing (a transfer that ended early does not wait for it) and close."""
        self._stop.set()
        self._hasher.join()
        os.close(self.fd)


class PatternData:
    """``size`` bytes of the test pattern (formats/pattern.py), each buffer keyed by its
    index: the data path makes them where the packets leave (a board's pattern source), so
    this host never holds them. The receiver checks the pattern, for no digest is made."""

    sha256 = ""

    def __init__(self, size: int) -> None:
        self.size = self.length = size

    def buffer(self, index: int, size: int) -> tuple[PatternBuffer, bool] | None:
        start = index * size
        if start >= self.size:
            return None
        end = min(start + size, self.size)
        return PatternBuffer(index, end - start), end == self.size

    def release(self, index: int) -> None:
        pass

    def close(self) -> None:
        pass


class PortData(PatternData):
    """``size`` bytes from the board's source port (TAKE): what feeds it, the built-in
    stamp source or a user's, makes them, and only a board has one."""

    def buffer(self, index: int, size: int) -> tuple[TakenBuffer, bool] | None:
        found = super().buffer(index, size)
        return None if found is None else (TakenBuffer(found[0].length), found[1])


class StreamSource:
    """A pipe or standard input, read once and in order.

    Its length and SHA-256 are known only at its end, so the data is followed by a
    trailer: magic, length, SHA-256, and ``seal(digest)`` when a secret is shared. Each
    buffer is read ahead by one byte, so the one the data (and trailer) ends in is known
    as it is loaded. Buffers stay in memory until released: at most the outstanding ones.
    """

    def __init__(self, read: Callable[[int], bytes], seal: Callable[[bytes], bytes] | None = None) -> None:
        self.read, self.seal = read, seal
        self.size: int | None = None
        self.length = 0
        """Bytes of data read so far (the trailer not counted)."""
        self._digest = hashlib.sha256()
        self._ahead = bytearray()
        self._ended = False
        self._assigned = 0
        self._loaded: dict[int, tuple[bytes, bool]] = {}
        self._count = 0

    def buffer(self, index: int, size: int) -> tuple[bytes, bool] | None:
        while self._count <= index and not (self._ended and not self._ahead):
            self._load(size)
        return self._loaded.get(index)

    def release(self, index: int) -> None:
        self._loaded.pop(index, None)

    @property
    def sha256(self) -> str:
        """The data's SHA-256 once the stream has ended, else empty."""
        return self._digest.hexdigest() if self._ended else ""

    def _load(self, size: int) -> None:
        while len(self._ahead) <= size and not self._ended:
            chunk = self.read(max(CHUNK, size + 1 - len(self._ahead)))
            if chunk:
                self._digest.update(chunk)
                self.length += len(chunk)
                self._ahead += chunk
            else:
                digest = self._digest.digest()
                self._ahead += TRAILER.pack(TRAILER_MAGIC, self.length, digest)
                self._ahead += self.seal(digest) if self.seal else b""
                self._ended = True
                self.size = self._assigned + len(self._ahead)
        data = bytes(self._ahead[:size])
        del self._ahead[:size]
        self._assigned += len(data)
        self._loaded[self._count] = (data, self._ended and not self._ahead)
        self._count += 1

    def close(self) -> None:
        pass


def _open_for_reading(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise FileError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileError(f"{path} is not a regular file")
    return fd


# -- sinks ----------------------------------------------------------------------------------


class InOrder:
    """Feeds ``consume`` the data in file order: buffers that arrive ahead of a gap wait
    in memory; ranges already on disk (resumed) are read back when reached. A stream's
    last ``hold`` bytes (its trailer) are kept back and end up in :attr:`held_back`."""

    def __init__(self, consume: Callable[[bytes | memoryview], None], *, hold: int = 0,
                 on_disk: dict[int, int] | None = None,
                 read: Callable[[int, int], bytes] | None = None) -> None:
        self.consume, self.hold, self.read = consume, hold, read
        self.on_disk = dict(on_disk or {})
        """Offset -> length of ranges to read back rather than wait for."""
        self.next = 0
        self.early: dict[int, bytes] = {}
        self.held_back = b""

    def add(self, offset: int, data: bytes | memoryview) -> None:
        if offset != self.next:
            self.early[offset] = bytes(data)
            return
        self._take(data)
        self.advance()

    def advance(self) -> None:
        while True:
            if self.next in self.early:
                self._take(self.early.pop(self.next))
            elif self.next in self.on_disk:
                start, length = self.next, self.on_disk.pop(self.next)
                for at in range(start, start + length, CHUNK):
                    self._take(self.read(at, min(CHUNK, start + length - at)))
            else:
                return

    def _take(self, data: bytes | memoryview) -> None:
        self.next += len(data)
        if not self.hold:
            self.consume(data)
            return
        if len(data) < self.hold:  # the trailer's last few bytes, or a tiny transfer
            joined = self.held_back + bytes(data)
            if len(joined) > self.hold:
                self.consume(joined[:-self.hold])
            self.held_back = joined[-self.hold:]
            return
        # What was held back is data after all; of this, only its last ``hold`` bytes may
        # be the trailer. No copy of the buffer itself.
        if self.held_back:
            self.consume(self.held_back)
        view = memoryview(data)
        self.consume(view[:len(view) - self.hold])
        self.held_back = bytes(view[len(view) - self.hold:])


@dataclass
class Expectation:
    """What the sender announced, and (for a stream) how its trailer is sealed."""

    announced: Announcement
    seal: Callable[[bytes], bytes] | None = None

    @property
    def hold(self) -> int:
        return trailer_size(self.seal is not None) if self.announced.trailer else 0


class BornCheck:
    """Data born on a board, in file order, cut in ``buffer_size`` buffers: where it first
    is not ``what`` it should be."""

    what = ""

    def __init__(self, buffer_size: int) -> None:
        self.buffer_size = buffer_size
        self.wrong: int | None = None
        """The offset of the first byte that differs."""

    def problem(self) -> str | None:
        if self.wrong is None:
            return None
        key, at = divmod(self.wrong, self.buffer_size)
        return f"the data is not {self.what} from byte {self.wrong} on (buffer {key}, its byte {at})"


class PatternCheck(BornCheck):
    """The test pattern: each buffer's bytes compared with its pattern."""

    what = "the test pattern"

    def __init__(self, buffer_size: int) -> None:
        super().__init__(buffer_size)
        self._made = (-1, memoryview(b""))
        """The last buffer's pattern, for data that comes in pieces of it."""

    def update(self, offset: int, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view and self.wrong is None:
            key, start = divmod(offset, self.buffer_size)
            piece = view[:self.buffer_size - start]
            if self._made[0] != key:
                self._made = (key, memoryview(pattern(key, self.buffer_size)))
            if (at := first_difference(self._made[1][start:start + len(piece)], piece)) is not None:
                self.wrong = offset + at
            offset, view = offset + len(piece), view[len(piece):]


class StampCheck(BornCheck):
    """The stamp source's numbered 32-bit words, one a 4-byte beat: consecutive inside each
    buffer (a take never skips a word), and rising between buffers, where each number
    skipped is a word the board's source port refused; how many went missing."""

    what = "the stamp source's words"

    def __init__(self, buffer_size: int) -> None:
        super().__init__(buffer_size)
        self.missing = 0
        """Words offered up to the last that came, and not in the data: those refused
        before the first take (the first word's number) and between takes."""
        self._next = 0
        self._partial = b""

    def update(self, offset: int, data: bytes | memoryview) -> None:
        if self._partial:  # a word split between two pieces (a buffer's are copied only then)
            data, offset = self._partial + bytes(data), offset - len(self._partial)
        whole = len(data) - len(data) % 4
        self._partial = bytes(data[whole:])
        at = 0
        while at < whole and self.wrong is None:  # a buffer's run at a time, compared in C
            run = min(whole - at, self.buffer_size - (offset + at) % self.buffer_size)
            self._run(offset + at, memoryview(data)[at:at + run - run % 4] if run >= 4 else b"")
            at += max(4, run - run % 4)

    def _run(self, offset: int, words: bytes | memoryview) -> None:
        """Whole words of one buffer, from ``offset``: the numbers ``_next`` on, or, where
        a buffer begins, after any the port refused."""
        if not words:
            return
        number = int.from_bytes(words[:4], "little")
        skipped = (number - self._next) & 0xFFFF_FFFF
        if skipped and (offset % self.buffer_size or skipped >= 1 << 31):
            self.wrong = offset
            return
        self.missing += skipped  # a new buffer, taken after words the port refused
        expected = stamps(number, 1, len(words))
        if (at := first_difference(expected, words)) is not None:
            self.wrong = offset + at - at % 4
        self._next = (number + len(words) // 4) & 0xFFFF_FFFF


class Verifier:
    """The SHA-256 of the data in file order, checked against the announcement; or, for
    data born on the board, the data itself, where it can be checked (``buffer_size``
    says where its buffers start)."""

    def __init__(self, expect: Expectation, buffer_size: int = 0) -> None:
        self.expect = expect
        self.digest = hashlib.sha256()
        check = {PATTERN: PatternCheck, STAMPS: StampCheck}.get(expect.announced.data)
        self.born = check(buffer_size) if check else None
        self.length = 0

    def update(self, data: bytes | memoryview) -> None:
        if self.born:
            self.born.update(self.length, data)
        elif not self.expect.announced.data:
            self.digest.update(data)
        self.length += len(data)

    def problem(self, order: InOrder) -> str | None:
        """Why the data differs from what the sender announced, if it does."""
        if order.early or order.on_disk:
            return "data is missing: not every buffer arrived"
        announced, got = self.expect.announced, self.digest.hexdigest()
        if announced.trailer:
            if len(order.held_back) != self.expect.hold:
                return "the data ended without its trailer"
            magic, length, digest = TRAILER.unpack_from(order.held_back)
            if magic != TRAILER_MAGIC:
                return "the data's trailer is damaged"
            if self.expect.seal and self.expect.seal(digest) != order.held_back[TRAILER.size:]:
                return "the data's digest is not sealed with the shared secret"
            if announced.size is not None and length != announced.size:
                return f"size mismatch: the sender announced {announced.size} bytes, its trailer {length}"
            size, sha256 = length, digest.hex()
        else:
            size, sha256 = announced.size, announced.sha256
        if self.length != size:
            return f"size mismatch: the sender announced {size} bytes, received {self.length}"
        if announced.data:
            return self.born.problem() if self.born else None
        if got != sha256:
            return f"SHA-256 mismatch: the sender announced {sha256}, received {got}"
        return None


class FileSink:
    """Writes one announced file as ``<name>.partial`` inside the directory ``root_fd``
    names, creating subdirectories (never through a symlink), and renames it when verified.

    Raises FileError (the reason to refuse the OPEN) when the file exists and ``force``
    is not given, or the directory cannot be written.
    """

    def __init__(self, root_fd: int, name: str, expect: Expectation, buffer_size: int,
                 *, force: bool = False) -> None:
        self.expect, self.buffer_size, self.force = expect, buffer_size, force
        *folders, self.name = name.split("/")
        self.shown = name
        self.dir_fd = _descend(root_fd, folders)
        self.partial = self.name + ".partial"
        self.record = self.partial + ".resume"
        self.fd = self.fd_read = -1
        try:
            if not force and _exists(self.name, self.dir_fd):
                raise FileError(f"{name} exists at the receiver (it replaces files only with --force)")
            existed = _exists(self.partial, self.dir_fd)
            self.fd = os.open(self.partial, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644, dir_fd=self.dir_fd)
            try:  # a station's senders each write in a process of their own (host/station.py)
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise FileError(f"{name} is being received from another sender now") from None
            self.held = self._resume()
            self.replaced_partial = not self.held and existed
            """An earlier transfer's partial file of other data, now overwritten."""
            if not self.held:
                os.ftruncate(self.fd, 0)
            self.fd_read = os.open(self.partial, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.dir_fd)
            self._reserve(name)
        except OSError as exc:
            self.close()
            raise FileError(f"cannot write {name}: {exc.strerror}") from None
        except FileError:
            self.close()
            raise
        self.verifier = Verifier(expect, buffer_size)
        self.order = InOrder(self.verifier.update, hold=expect.hold,
                             on_disk={self._offset(n): self._length(n) for n in self.held},
                             read=lambda at, length: os.pread(self.fd_read, length, at))
        self.written: set[int] = set(self.held)
        self.unadvised: tuple[int, int, int] | None = None
        """The span written since the last advice, and its bytes."""
        self.advised: tuple[int, int] | None = None
        """The span whose writeback the last advice started."""
        self.verdict: str | None = None
        """Why the whole data was found wrong, once it was judged."""
        self._recorded_at = time.monotonic()

    def _reserve(self, name: str) -> None:
        """Claim the announced size on disk now, so that a file too large for the space left
        is refused at its OPEN, and a station's other transfers keep what they claimed."""
        size = self.expect.announced.size
        if not size:
            return  # a stream's size is not known: it takes its space as it comes
        try:
            os.posix_fallocate(self.fd, 0, size)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                return  # a file system that cannot reserve: written as it comes
            room = os.fstatvfs(self.dir_fd)
            if not self.held:
                self._remove(self.partial)
            raise FileError(f"no room for {name} at the receiver: {size} bytes, "
                            f"{room.f_bavail * room.f_frsize} free") from None

    # -- resume -------------------------------------------------------------------------------

    @property
    def resumable(self) -> bool:
        """A sized transfer whose announcement says which file it is (its digest, or its
        modification time), or the test pattern."""
        a = self.expect.announced
        return a.size is not None and (a.sha256 is not None or a.modified is not None or a.pattern)

    @property
    def identity(self) -> tuple:
        """What a partial copy must have been written with to resume from: the announced
        identity, and the pattern's buffer size (its buffers start over at each)."""
        return (*self.expect.announced.identity, self.buffer_size if self.expect.announced.pattern else None)

    @property
    def transfer_size(self) -> int | None:
        """The data and its trailer; None for a stream."""
        size = self.expect.announced.size
        return None if size is None else size + self.expect.hold

    @property
    def total_buffers(self) -> int | None:
        size = self.transfer_size
        return None if size is None else max(1, math.ceil(size / self.buffer_size))

    def _offset(self, n: int) -> int:
        return (n - 1) * self.buffer_size

    def _length(self, n: int) -> int:
        size = self.transfer_size
        return self.buffer_size if size is None else min(self.buffer_size, size - self._offset(n))

    def _resume(self) -> frozenset[int]:
        """Buffers of this file already in the partial file, by an earlier transfer's record."""
        try:
            with os.fdopen(os.open(self.record, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self.dir_fd)) as f:
                record = json.load(f)
            identity = (record["size"], record["sha256"], record["modified"], record.get("pattern"))
            ranges = record["ranges"]
        except (OSError, ValueError, KeyError, TypeError):
            return frozenset()
        if not self.resumable or identity != self.identity:
            return frozenset()
        covered = [(int(a), int(b)) for a, b in ranges]
        return frozenset(n for n in range(1, self.total_buffers + 1)
                         if any(a <= self._offset(n) and self._offset(n) + self._length(n) <= b
                                for a, b in covered))

    @property
    def resumed_bytes(self) -> int:
        return sum(self._length(n) for n in self.held)

    def save_record(self) -> None:
        """Sync the data, then record which buffers it holds (atomically)."""
        if not self.resumable or self.fd < 0:
            return
        os.fdatasync(self.fd)
        ranges: list[list[int]] = []
        for n in sorted(self.written):
            start, end = self._offset(n), self._offset(n) + self._length(n)
            if ranges and ranges[-1][1] == start:
                ranges[-1][1] = end
            else:
                ranges.append([start, end])
        size, sha256, modified, pattern = self.identity
        text = json.dumps({"size": size, "sha256": sha256, "modified": modified, "pattern": pattern,
                           "ranges": ranges})
        temporary = self.record + ".new"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644,
                     dir_fd=self.dir_fd)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(temporary, self.record, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        self._recorded_at = time.monotonic()

    # -- data ---------------------------------------------------------------------------------

    def write(self, offset: int, data: memoryview) -> None:
        written = 0
        while written < len(data):
            written += os.pwrite(self.fd, data[written:], offset + written)
        self._uncache(offset, len(data))
        self.written.add(offset // self.buffer_size + 1)
        self.order.add(offset, data)
        if time.monotonic() - self._recorded_at > RECORD_INTERVAL:
            self.save_record()

    def _uncache(self, offset: int, length: int) -> None:
        """Keep what arrives out of the page cache: a receiver writes far more than it reads
        back, and memory new to the cache is dear (on this project's VMs 2.4 s of CPU a GB
        written, 0.2 with pages reused; docs/benchmarks.md, issue 68). Each UNCACHE_BYTES
        written, the span they cover starts its writeback, and the span before, clean by
        now, is dropped: two system calls a span, whatever the buffers' size."""
        start, end, count = self.unadvised or (offset, offset + length, 0)
        start, end, count = min(start, offset), max(end, offset + length), count + length
        if count < UNCACHE_BYTES:
            self.unadvised = start, end, count
            return
        clean, self.advised, self.unadvised = self.advised, (start, end), None
        with suppress(OSError):  # advice only: a file system may not take it
            os.posix_fadvise(self.fd, start, end - start, os.POSIX_FADV_DONTNEED)
            if clean:
                os.posix_fadvise(self.fd, clean[0], clean[1] - clean[0], os.POSIX_FADV_DONTNEED)

    def problem(self) -> str | None:
        self.order.advance()
        self.verdict = self.verifier.problem(self.order)
        return self.verdict

    def commit(self) -> Path:
        """Move the verified file into place; never over another unless forced."""
        if self.expect.hold:
            os.ftruncate(self.fd, self.verifier.length)  # the trailer was written after the data
        os.fsync(self.fd)
        try:
            if self.force:
                os.replace(self.partial, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            else:
                os.link(self.partial, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
                os.unlink(self.partial, dir_fd=self.dir_fd)
        except FileExistsError:
            raise FileError(f"{self.shown} appeared at the receiver during the transfer; the data is "
                            f"kept in {self.partial}") from None
        except OSError as exc:  # the output folder went away, or its file system
            raise FileError(f"cannot put {self.shown} in place: {exc.strerror}") from None
        self._remove(self.record)
        self.close()
        return Path(self.shown)

    def keep_or_discard(self) -> str | None:
        """After a failure: keep what can resume (saying so), else remove the partial file
        (also when the data was found wrong: which buffer is to blame is not known)."""
        if self.verdict or not self.resumable or not self.written:
            self._remove(self.partial)
            self._remove(self.record)
            self.close()
            return None
        try:
            self.save_record()
        except OSError as exc:  # the output folder went away, or its file system
            self.close()
            return f"the partial data could not be kept: {exc.strerror}"
        self.close()
        size = self.expect.announced.size
        done = min(size, sum(self._length(n) for n in self.written))
        return (f"kept {done} of {size} bytes in {self.shown}.partial: "
                f"the same send resumes")

    def _remove(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self.dir_fd)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        for attribute in ("fd", "fd_read"):
            fd = getattr(self, attribute, -1)
            if fd >= 0:
                os.close(fd)
                setattr(self, attribute, -1)
        if getattr(self, "dir_fd", -1) >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1


class BoardVerdict:
    """A receiving board's drains, buffer by buffer (DRAIN), in place of a verifier of
    bytes: the bytes never reach this host. Where ``checks``, its pattern checker's counts
    are the verdict; else only the size is."""

    born = None

    def __init__(self, expect: Expectation, buffer_size: int, checks: bool) -> None:
        self.expect, self.buffer_size, self.checks = expect, buffer_size, checks
        self.length = 0
        self.mismatched_beats = 0
        self.first_wrong: int | None = None
        """The index of the first buffer with a beat that was not the pattern."""

    def add(self, offset: int, checked: DrainedBuffer) -> None:
        self.length += checked.length
        self.mismatched_beats += checked.mismatched_beats
        if self.checks and checked.mismatched_beats and (self.first_wrong is None or offset // self.buffer_size < self.first_wrong):
            self.first_wrong = offset // self.buffer_size

    def problem(self) -> str | None:
        if self.length != self.expect.announced.size:
            return f"size mismatch: the sender announced {self.expect.announced.size} bytes, received {self.length}"
        if self.first_wrong is not None:
            return (f"the board found {self.mismatched_beats} beats that are not the test pattern, the first in "
                    f"buffer {self.first_wrong}")
        return None


class BoardSink:
    """Data drained where it arrived, by the receiving board: to its pattern checker
    (``checks``) or to the gateware on its sink port; nothing is written here
    (docs/sink-port.md)."""

    def __init__(self, expect: Expectation, buffer_size: int, checks: bool) -> None:
        self.expect = expect
        self.shown = "(checked on the board)" if checks else "(drained to the board's sink port)"
        self.verifier = BoardVerdict(expect, buffer_size, checks)
        self.resumed_bytes, self.held, self.total_buffers = 0, frozenset(), None
        self.verdict: str | None = None

    def write(self, offset: int, data: DrainedBuffer) -> None:
        self.verifier.add(offset, data)

    def problem(self) -> str | None:
        self.verdict = self.verifier.problem()
        return self.verdict

    def commit(self) -> Path:
        return Path(self.shown)

    def keep_or_discard(self) -> str | None:
        return None


class StdoutSink:
    """Writes the data to a file descriptor (standard output) strictly in order."""

    def __init__(self, fd: int, expect: Expectation, buffer_size: int = 0) -> None:
        self.fd, self.expect = fd, expect
        self.verifier = Verifier(expect, buffer_size)
        self.order = InOrder(self._out, hold=expect.hold)
        self.shown, self.resumed_bytes, self.held = "-", 0, frozenset()
        self.total_buffers = None
        self.verdict: str | None = None

    def _out(self, data: bytes | memoryview) -> None:
        self.verifier.update(data)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def write(self, offset: int, data: memoryview) -> None:
        self.order.add(offset, data)

    def problem(self) -> str | None:
        self.verdict = self.verifier.problem(self.order)
        return self.verdict

    def commit(self) -> Path:
        return Path("-")

    def keep_or_discard(self) -> str | None:
        return None


def _descend(root_fd: int, folders: list[str]) -> int:
    """A descriptor for ``root/folders...``, making what is missing; no symlink is followed."""
    fd = os.dup(root_fd)
    try:
        for folder in folders:
            try:
                os.mkdir(folder, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise FileError(f"cannot write into {folder}: it is not a directory (or is a symlink)")
                raise
            os.close(fd)
            fd = inner
    except OSError as exc:
        os.close(fd)
        raise FileError(f"cannot make the directory {folder}: {exc.strerror}") from None
    except FileError:
        os.close(fd)
        raise
    return fd


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
