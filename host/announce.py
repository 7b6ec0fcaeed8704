"""What a sender says about a file in its OPEN client string (not part of RFC 998).

``netblt-file/1 size=N modified=NS name=NAME files=I/N session=S``, fields separated by
spaces. ``NAME`` is the file's path relative to what was sent, ``/``-separated and
percent-encoded UTF-8, so any name travels intact and the receiver judges it. The data's
SHA-256 follows it in a trailer (host/files.py), so the first buffer leaves while the
sender is still hashing; ``modified`` (the file's modification time in ns) with the size
tells a receiver holding part of the file whether it may resume. A stream of unknown
length says ``size=stream``. An announcement may instead name ``sha256=HEX`` up front:
then there is no trailer. ``data=`` announces data born on the sender's board, which no
host holds to hash, so no trailer follows: ``pattern``, the test pattern
(formats/pattern.py), which the receiver checks byte for byte; ``stamps``, the built-in
stamp source's numbered words, whose gaps the receiver counts; ``port``, whatever feeds
the board's source port, which nothing here can check. ``files`` and ``session`` tie the files of one ``netblt send``
together. With a shared secret, host/auth.py appends ``time``, ``nonce`` and ``mac``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

TAG = b"netblt-file/1"
STREAM = "stream"
PATTERN, STAMPS, PORT = "pattern", "stamps", "port"
BORN = (PATTERN, STAMPS, PORT)
"""What ``data=`` may say."""


@dataclass(frozen=True)
class Announcement:
    name: str
    size: int | None
    """None: a stream, whose length the trailer gives."""
    sha256: str | None = None
    """None: the digest follows the data in a trailer."""
    index: int = 1
    count: int = 1
    session: str = ""
    modified: int | None = None
    """The file's modification time (ns): with the size, what a resumed transfer must match."""
    data: str = ""
    """Data born on the sender's board (one of :data:`BORN`), not a file's."""

    @property
    def pattern(self) -> bool:
        """The data is the test pattern, each buffer keyed by its index."""
        return self.data == PATTERN

    @property
    def trailer(self) -> bool:
        return self.sha256 is None and not self.data

    @property
    def identity(self) -> tuple:
        """What a partial copy must have been announced with to resume from."""
        return self.size, self.sha256, self.modified

    def encode(self) -> bytes:
        fields = [f"size={STREAM if self.size is None else self.size}"]
        if self.sha256:
            fields.append(f"sha256={self.sha256}")
        if self.modified is not None:
            fields.append(f"modified={self.modified}")
        if self.data:
            fields.append(f"data={self.data}")
        fields.append(f"name={quote(self.name, safe='/')}")
        if self.count > 1 or self.session:
            fields += [f"files={self.index}/{self.count}", f"session={self.session}"]
        return b" ".join([TAG, *(f.encode() for f in fields)])


def fields(client_string: bytes) -> dict[str, str]:
    """The ``key=value`` fields of a client string."""
    out = {}
    for part in client_string.split()[1:]:
        key, sep, value = part.decode("ascii", "replace").partition("=")
        if sep:
            out[key] = value
    return out


def read(client_string: bytes) -> Announcement:
    """The announcement in a client string; ValueError says what is wrong with it."""
    if not client_string.startswith(TAG + b" "):
        raise ValueError("this receiver takes files from netblt send (client string netblt-file/1)")
    f = fields(client_string)
    try:
        name = unquote(f["name"], errors="strict")
        size = None if f["size"] == STREAM else int(f["size"])
        index, _, count = f.get("files", "1/1").partition("/")
        modified = int(f["modified"]) if "modified" in f else None
        if f.get("data", PATTERN) not in BORN:
            raise ValueError(f"data={f['data']}: this receiver knows data={', '.join(BORN)}")
        announced = Announcement(name, size, f.get("sha256"), int(index), int(count), f.get("session", ""),
                                 modified, f.get("data", ""))
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"bad file announcement: {exc}") from None
    if announced.data and (announced.size is None or announced.sha256 is not None):
        raise ValueError(f"bad file announcement: data={announced.data} has a size and no digest")
    if announced.size is not None and announced.size < 0:
        raise ValueError("bad file announcement: a negative size")
    if announced.sha256 is not None and (len(announced.sha256) != 64 or
                                         any(c not in "0123456789abcdef" for c in announced.sha256)):
        raise ValueError("bad file announcement: a SHA-256 is 64 hex digits")
    if not 1 <= announced.index <= announced.count:
        raise ValueError(f"bad file announcement: file {announced.index} of {announced.count}")
    return announced
