"""Proof of a shared secret in the set-up exchange, and a keyed digest of the data.

With a secret, the sender's OPEN client string carries ``time``, a random ``nonce`` and
``mac`` = HMAC-SHA256(secret, the OPEN's UID, its mode and every other client field).
The receiver admits only an OPEN whose MAC checks out, whose time is within
:data:`WINDOW` of its own clock, and whose (UID, nonce) it has not admitted before, so a
recorded OPEN cannot be replayed. Its RESPONSE carries a MAC over the same UID and
nonce: the sender learns that it reached the holder of the secret. The sender's SHA-256
of the data travels in the trailer after it under a MAC of its own (an up-front digest
would be one of the fields the OPEN's MAC covers), so data altered on the way fails the
final check.
The secret itself never goes on the wire. Nothing is encrypted.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections import OrderedDict
from pathlib import Path

from .announce import fields

MIN_SECRET = 16
"""Bytes: shorter secrets are refused as guessable."""
WINDOW = 300.0
"""Seconds an OPEN's time may differ from the receiver's clock."""
ENVIRONMENT = "NETBLT_SECRET"
"""The secret itself, for those who keep it in the environment rather than a file."""


class SecretError(ValueError):
    """A secret that cannot be used; the message is meant for the user."""


def _mac(key: bytes, *parts: bytes) -> str:
    return hmac.new(key, b"\0".join(parts), hashlib.sha256).hexdigest()


class Secret:
    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_SECRET:
            raise SecretError(f"the shared secret has {len(key)} bytes; use at least {MIN_SECRET}")
        self.key = key
        self._seen: OrderedDict[tuple[int, str], float] = OrderedDict()
        """(UID, nonce) of OPENs admitted within the window."""

    @classmethod
    def load(cls, path: str | os.PathLike | None) -> Secret | None:
        """The secret in ``path`` (trailing newline ignored), or in $NETBLT_SECRET, or None."""
        if path is None:
            value = os.environ.get(ENVIRONMENT)
            return cls(value.encode()) if value else None
        try:
            return cls(Path(path).read_bytes().rstrip(b"\r\n"))
        except OSError as exc:
            raise SecretError(f"cannot read the secret file {path}: {exc.strerror}") from None

    # -- the sender's OPEN, the receiver's check ------------------------------------------------

    def sign_open(self, uid: int, write_mode: bool, fields: bytes) -> bytes:
        """``fields`` with the time, a nonce and their MAC appended."""
        signed = fields + f" time={int(time.time())} nonce={secrets.token_hex(16)}".encode()
        return signed + b" mac=" + self._open_mac(uid, write_mode, signed).encode()

    def check_open(self, uid: int, write_mode: bool, client_string: bytes,
                   now: float | None = None) -> str | None:
        """Why this OPEN does not prove knowledge of the secret, or None if it does."""
        now = time.time() if now is None else now
        signed, sep, mac = client_string.rpartition(b" mac=")
        given = fields(signed)
        if not sep or "time" not in given or "nonce" not in given:
            return "authentication required: the sender gave no proof of the shared secret"
        if not hmac.compare_digest(mac, self._open_mac(uid, write_mode, signed).encode()):
            return "authentication failed: the proof does not match this receiver's secret"
        try:
            skew = abs(now - int(given["time"]))
        except ValueError:
            return "authentication failed: bad time"
        if skew > WINDOW:
            return f"authentication failed: the OPEN's time is {skew:.0f} s off this receiver's clock"
        key = (uid, given["nonce"])
        while self._seen and next(iter(self._seen.values())) < now - 2 * WINDOW:
            self._seen.popitem(last=False)
        if key in self._seen:
            return "authentication failed: this OPEN was admitted before (a replay)"
        self._seen[key] = now
        return None

    def _open_mac(self, uid: int, write_mode: bool, signed: bytes) -> str:
        return _mac(self.key, b"netblt-open/1", uid.to_bytes(4, "big"), bytes([write_mode]), signed)

    # -- the receiver's RESPONSE, the sender's check --------------------------------------------

    def sign_response(self, uid: int, open_string: bytes) -> bytes:
        return b"netblt-recv/1 mac=" + self._response_mac(uid, open_string).encode()

    def check_response(self, uid: int, open_string: bytes, client_string: bytes) -> str | None:
        _, sep, mac = client_string.rpartition(b" mac=")
        if sep and hmac.compare_digest(mac, self._response_mac(uid, open_string).encode()):
            return None
        return "the receiver did not prove knowledge of the shared secret"

    def _response_mac(self, uid: int, open_string: bytes) -> str:
        nonce = fields(open_string).get("nonce", "")
        return _mac(self.key, b"netblt-response/1", uid.to_bytes(4, "big"), nonce.encode())

    # -- the data's digest, in its trailer -------------------------------------------------------

    def seal(self, uid: int, digest: bytes) -> bytes:
        return bytes.fromhex(_mac(self.key, b"netblt-trailer/1", uid.to_bytes(4, "big"), digest))

