"""Files as transfer sources and sinks, and the end-to-end SHA-256 that checks them.

The data sender's SHA-256 travels in its client string (OPEN or RESPONSE); the
receiver hashes buffers in file order as they are delivered and compares at the end.
The output is written under a temporary name and renamed only when verified.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

CLIENT_TAG = b"netblt-file/1"


def describe(size: int, sha256: str, name: str) -> bytes:
    """The client string that announces a file: tag, size, digest and base name."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:128] or "data"
    return b" ".join([CLIENT_TAG, f"size={size}".encode(), f"sha256={sha256}".encode(),
                      f"name={safe}".encode()])


def parse_description(client_string: bytes) -> dict[str, str]:
    """The fields of :func:`describe`'s string; empty if the peer sent something else."""
    parts = client_string.split()
    if not parts or parts[0] != CLIENT_TAG:
        return {}
    fields = {}
    for part in parts[1:]:
        key, sep, value = part.decode("ascii", "replace").partition("=")
        if sep:
            fields[key] = value
    return fields


class FileSource:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size

    def sha256(self) -> str:
        with open(self.path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.fd, length, offset)

    def close(self) -> None:
        os.close(self.fd)


class FileSink:
    """Writes at buffer offsets into ``<target>.partial``; :meth:`commit` renames it.

    ``out`` is a file, a directory, or None for the current directory; the file name
    comes from the sender's client string unless ``out`` names a file.
    """

    def __init__(self, out: str | os.PathLike | None) -> None:
        self.out = Path(out) if out is not None else None
        self.target: Path | None = None
        self.partial: Path | None = None
        self.fd = -1
        self.expected: dict[str, str] = {}
        self.hash = hashlib.sha256()
        self._next = 0
        """The file offset the hash has reached."""
        self._early: dict[int, bytes] = {}
        """Buffers delivered ahead of a gap: kept until the hash reaches them."""
        self.size = 0

    def begin(self, peer_client_string: bytes) -> None:
        self.expected = parse_description(peer_client_string)
        name = self.expected.get("name", "netblt.out")
        if self.out is None:
            self.target = Path(name)
        elif self.out.is_dir():
            self.target = self.out / name
        else:
            self.target = self.out
        self.partial = self.target.with_name(self.target.name + ".partial")
        self.fd = os.open(self.partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(self, offset: int, data: memoryview) -> None:
        written = 0
        while written < len(data):
            written += os.pwrite(self.fd, data[written:], offset + written)
        self.size = max(self.size, offset + len(data))
        if offset != self._next:
            self._early[offset] = bytes(data)
            return
        self.hash.update(data)
        self._next += len(data)
        while self._next in self._early:
            chunk = self._early.pop(self._next)
            self.hash.update(chunk)
            self._next += len(chunk)

    def verify(self) -> str | None:
        """Why the data written differs from what the sender announced, if it does."""
        if "sha256" not in self.expected:
            return "the sender gave no SHA-256: the data cannot be verified"
        if str(self.size) != self.expected.get("size"):
            return f"size mismatch: the sender announced {self.expected.get('size')} bytes, received {self.size}"
        if self.hash.hexdigest() != self.expected["sha256"]:
            return (f"SHA-256 mismatch: the sender announced {self.expected['sha256']}, "
                    f"received {self.hash.hexdigest()}")
        return None

    def commit(self) -> Path:
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        os.replace(self.partial, self.target)
        return self.target

    def discard(self) -> None:
        """Remove the partial output: a failed transfer leaves nothing that looks complete."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.partial.unlink(missing_ok=True)
