"""What the host link keeps of each request (docs/host-link.md): the request, the share of
a joined request's reply, and a compiled run's requests left in flight QUIET."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..formats import host_link as F

ID_MODULUS = 1 << 16


def before(a: int, b: int) -> bool:
    """``a`` comes before ``b`` in 16-bit serial order."""
    return 0 < (b - a) % ID_MODULUS < ID_MODULUS // 2


@dataclass
class Request:
    type: F.Type
    body: bytes = b""
    value: int = 0
    flags: int = 0
    id: int = 0
    """Given as it goes out: the board runs requests in ID order, so an urgent request
    submitted behind a queue of uploads still goes before them."""
    reply: tuple[F.Header, bytes] | None = None
    """The board's answer, once it came."""
    sent_at: float | None = None
    """When it was first sent: its reply times a round trip. None once it is sent again
    (Karn's rule: a reply to a request sent twice times neither)."""
    parts: dict[int, bytes] = field(default_factory=dict)
    """A DOWNLOAD's reply datagrams so far, by the word address each starts at, where it
    asked for several."""

    @property
    def answer(self) -> tuple[F.Header, bytes]:
        """The reply, asked for once it came."""
        assert self.reply is not None, "its reply has not come"
        return self.reply

    def take(self, header: F.Header, body: bytes | memoryview) -> bool:
        """A reply to it came: true once it has its whole reply (a DOWNLOAD that asked for
        several datagrams, each the words from its ``value`` on, has them all)."""
        wanted = F.download_parts(self.body) if self.type == F.Type.DOWNLOAD and header.status == F.Status.OK else None
        if wanted is None or wanted[0] <= wanted[1]:
            self.reply = (header, bytes(body))
            return True
        words, step = wanted
        at = header.value - self.value
        if at % step == 0 and 0 <= at < words and len(body) == 4 * min(step, words - at):
            self.parts[at] = bytes(body)
        if len(self.parts) * step < words:
            return False
        self.reply = (header._replace(value=self.value), b"".join(self.parts[at] for at in sorted(self.parts)))
        self.parts = {}
        return True


@dataclass
class Part:
    """Register operations that joined an earlier request: their share of its reply."""

    request: Request
    start: int
    length: int

    @property
    def reply(self) -> tuple[F.Header, bytes] | None:
        if self.request.reply is None:
            return None
        header, body = self.request.reply
        return header, body[self.start:self.start + self.length]

    @property
    def answer(self) -> tuple[F.Header, bytes]:
        """Its share of the reply, asked for once it came."""
        header, body = self.request.answer
        return header, body[self.start:self.start + self.length]


@dataclass
class LeftRun:
    """Requests a compiled run sent QUIET and left unanswered (driver/link.py), IDs
    ``first_id`` on: one record, answered together by a later ``ack`` past them, not a
    request each (that cost a 16 KiB buffer's turn some 80 us), until a recovery needs them
    one by one."""

    first_id: int
    specs: F.BulkRequests
    """The run's requests, over a copy of its data."""
    start: int
    """The index in ``specs`` of ``first_id``: those before it were answered."""
    end: int
    """How many ``specs`` has."""
    sent_at: float
    ends: dict[int, Request]
    """The caller's own requests among them (its first and last), by index: answered where
    they are waited for."""

    @property
    def count(self) -> int:
        return self.end - self.start

    def ran(self, requests: int, session: int) -> None:
        """The first ``requests`` of it ran: the caller's among them are answered."""
        for index, request in self.ends.items():
            if self.start <= index < self.start + requests:
                request.reply = known_reply(request, session)
        self.start += requests
        self.first_id = (self.first_id + requests) % ID_MODULUS

    def requests(self) -> list[Request]:
        """A request each, as a recovery needs them."""
        out = []
        for index in range(self.start, self.end):
            request = self.ends.get(index) or Request(*self.specs[index])
            request.id, request.flags = (self.first_id + index - self.start) % ID_MODULUS, F.FLAG_QUIET
            request.sent_at = self.sent_at
            out.append(request)
        return out


def known_reply(request: Request, session: int) -> tuple[F.Header, bytes] | None:
    """The reply of ``request``, known to have run, where its reply says no more than
    that: an UPLOAD's is empty, a REGISTERS request's that only writes is each operation
    DONE with its value. None where the board's own reply is needed."""
    body = b"" if request.type == F.Type.UPLOAD else \
        F.done_operations(request.body) if request.type == F.Type.REGISTERS else None
    return None if body is None else (F.Header(request.type | F.REPLY, id=request.id, session=session), body)
