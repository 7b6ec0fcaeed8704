"""What a sender says about a file in its OPEN client string (not part of RFC 998).

``netblt-file/1 size=N sha256=HEX name=NAME files=I/N session=S``, fields separated by
spaces. ``NAME`` is the file's path relative to what was sent, ``/``-separated and
percent-encoded UTF-8, so any name travels intact and the receiver judges it. A stream
of unknown length says ``size=stream`` and gives no digest: its data ends in a trailer
(host/files.py). ``files`` and ``session`` tie the files of one ``netblt send`` together.
With a shared secret, host/auth.py appends ``time``, ``nonce`` and ``mac``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

TAG = b"netblt-file/1"
STREAM = "stream"


@dataclass(frozen=True)
class Announcement:
    name: str
    size: int | None
    """None: a stream, whose length the trailer gives."""
    sha256: str | None = None
    index: int = 1
    count: int = 1
    session: str = ""

    def encode(self) -> bytes:
        fields = [f"size={STREAM if self.size is None else self.size}"]
        if self.sha256:
            fields.append(f"sha256={self.sha256}")
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
        announced = Announcement(name, size, f.get("sha256"), int(index), int(count), f.get("session", ""))
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"bad file announcement: {exc}") from None
    if announced.size is not None and (announced.size < 0 or not announced.sha256):
        raise ValueError("bad file announcement: a file needs its size and SHA-256")
    if not 1 <= announced.index <= announced.count:
        raise ValueError(f"bad file announcement: file {announced.index} of {announced.count}")
    return announced
