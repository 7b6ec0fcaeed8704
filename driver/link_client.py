"""The host's side of the host link (docs/host-link.md), sans I/O: reliable, pipelined,
exactly once.

Guarantees, given a board that keeps the protocol:

- every request is executed by the board exactly once, in the order submitted, however
  many datagrams are lost, duplicated or reordered either way: a lost request is sent
  again, a lost reply is asked for again (RESEND) and never re-executed, which matters
  for FIFO pops, commands and uploads;
- up to ``WINDOW`` requests are in flight at once, fewer after a loss;
- every event and control packet the board pushes is delivered once, in order;
- a board that does not answer for ``give_up`` seconds is an error naming its address,
  and so is a board that lost the session (reset, reloaded or taken over): it is
  reported, never silently resynchronised.

:class:`LinkClient` has no sockets and no clock (time is passed in), so tests and the
simulated board drive it exactly as driver/link.py's :class:`~.link.BoardLink` does over
a UDP socket.
"""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass, field

from ..formats import host_link as F
from ..formats.registers import decode_snapshot, dotted_quad
from ..protocol.endpoint import DataPathError
from ..protocol.timers import RetransmitTimer
from .link_requests import ID_MODULUS, LeftRun, Part, Request, before, known_reply


class LinkError(DataPathError):
    """The link cannot go on; the message is one line for the user."""


class BoardInUse(LinkError):
    """Another host holds the board's session."""


RETRY_BACKOFF = 64
"""The most the retry time is doubled to while the board stays silent. It follows the
round trips measured (:class:`~..protocol.timers.RetransmitTimer`, never under a board's
own few datagrams' time): a fixed one retried a board that answered late into a storm,
and a slow one made every loss cost the same wait."""

QUIET_PATIENCE = 0.05
"""Seconds the host link waits, at least, for word of QUIET requests, when none in flight
asks for a reply: a later datagram's ``ack`` answers them, the board's push of the SENT
event a buffer's upload and SEND end with coming once the buffer is on the wire, so the
retry time (a round trip's) would ask for STATUS each buffer. A request lost costs this
wait."""


@dataclass
class Pushed:
    """What the board pushed: EVENT words and control packets, in arrival order."""

    events: list[int] = field(default_factory=list)
    packets: list[F.ControlPacket] = field(default_factory=list)


class LinkClient:
    """One host-link session, sans I/O: :meth:`outgoing` says what to send, :meth:`receive`
    takes what came, :meth:`timeout` is called at :attr:`deadline`."""

    def __init__(self, *, retry: float = 0.05, give_up: float = 3.0, session: int | None = None) -> None:
        """``retry``: the shortest retry time (:attr:`timer`'s least); ``give_up``: seconds
        without a reply to what is in flight after which the board counts as gone."""
        self.session = session or secrets.randbits(32) | 1
        self.timer = RetransmitTimer(retry, backoff_most=RETRY_BACKOFF)
        self.give_up = give_up
        self.next_id = 1
        self.opening: Request | None = None
        self.waiting: deque[Request] = deque()
        """Submitted, not yet sent (the window is full)."""
        self.urgent: deque[Request] = deque()
        """Submitted as urgent, not yet sent: these go before any of :attr:`waiting`."""
        self.in_flight: dict[int, Request] = {}
        """Given an ID and not yet answered, in ID order."""
        self.left: deque[LeftRun] = deque()
        """Compiled runs left in flight QUIET, in ID order (each after the requests in
        :attr:`in_flight` that went before it)."""
        self.due: deque[Request] = deque()
        """Of those, the ones the board never saw (a recovery found): sent again, in ID
        order and as the window allows, before anything new."""
        self.pushed = Pushed()
        self.held_push = 0
        """The highest push number received with every one before it."""
        self.ack_owed = False
        self.heartbeat_owed = False
        self.sent_at: float | None = None
        """When the oldest unanswered datagram went out."""
        self.waiting_since: float | None = None
        """Since when an answer has been owed and none came: the first send since the link
        last made progress (a reply to what it sent). A board that answers STATUS but runs
        none of the requests (too large for the path to it) makes none."""
        self.heard_at: float | None = None
        """When the board last sent anything."""
        self.largest = 0
        """The largest datagram in flight, for the message when the board runs none."""
        self.recovering = False
        self.most = float(F.WINDOW)
        """The widest window: the board's, or fewer where the host's socket holds fewer replies."""
        self.window = self.most
        """Requests kept in flight: :attr:`most` on a clean link; halved at each loss and
        grown back by one a window's worth of replies, so that a lossy link does not send a
        whole window again for each datagram it loses (the board runs requests in order only)."""
        self.replays = 0
        self.resent = 0
        self.requests = 0
        """Requests given an ID: the board runs each exactly once (its LINK_EXECUTED)."""
        self.received = 0
        """Datagrams taken here, one at a time (the compiled bulk path takes its own)."""
        self.malformed_pushes = 0
        """Pushes whose records could not be read: acknowledged and counted, never read."""
        self._send: list[bytes] = []
        self.snapshot: dict[str, int] | None = None
        """The registers of the last STATUS asked for with :meth:`ask_status`."""
        self.want_snapshot = False

    # -- the caller's side ---------------------------------------------------------------------

    def open(self, take_over: bool = False) -> Request:
        self.opening = Request(F.Type.OPEN, flags=F.FLAG_TAKE_OVER if take_over else 0)
        self._emit(self.opening)
        return self.opening

    @property
    def opened(self) -> bool:
        return self.opening is not None and self.opening.reply is not None

    def submit(self, kind: F.Type, body: bytes = b"", value: int = 0, join: bool = False,
               urgent: bool = False, quiet: bool = False) -> Request | Part:
        """Queue a request. With ``join``, register operations join the last request still
        waiting in their queue when that is register operations with room: one datagram
        instead of several, each way, and the same order of execution. An ``urgent``
        request goes before every request waiting that is not (a resend must not wait
        behind megabytes of upload); it must not need any of them done first. ``quiet``:
        register writes whose reply nobody waits for go QUIET, answered by a later
        datagram's ``ack`` (:func:`known_reply`), unless operations that are not joins them."""
        queue = self.urgent if urgent else self.waiting
        last = queue[-1] if queue else None
        quiet = quiet and kind == F.Type.REGISTERS and F.writes_only(body)
        if join and kind == F.Type.REGISTERS and last is not None and last.type == F.Type.REGISTERS \
                and len(last.body) + len(body) <= F.MAX_OPERATIONS * F.OPERATION.end:
            part = Part(last, len(last.body), len(body))
            last.body += body
            if not quiet:
                last.flags &= ~F.FLAG_QUIET
            return part
        request = Request(kind, body, value, flags=F.FLAG_QUIET if quiet else 0)
        queue.append(request)
        return request

    def ask_status(self) -> None:
        """Ask for a snapshot of the board's registers (no session needed): it is in
        :attr:`snapshot` once it came."""
        self.snapshot, self.want_snapshot = None, True
        self._ask_status()

    @property
    def retry(self) -> float:
        """Seconds to wait for a reply now (:attr:`timer`), a quarter of ``give_up``
        at most."""
        return min(self.timer.timeout, max(self.timer.least, self.give_up / 4))

    def hands_over(self, requests: int) -> bool:
        """A compiled run of ``requests`` may take the next IDs now: every request queued
        has gone, none is to go again and no recovery runs; any in flight (the board runs
        them first, and the run hands their replies back) leave room for the whole run, so
        the board still keeps their replies when the run ends."""
        return not self.urgent and not self.waiting and not self.due and not self.recovering \
            and (self.opening is None or self.opened) and (not self.unanswered or requests <= self.room())

    def room(self) -> int:
        """Requests that may go now within :attr:`window` of the oldest unanswered."""
        oldest = self._oldest()
        if oldest is None:
            return int(self.window)
        return int(self.window) - (self.next_id - oldest) % ID_MODULUS

    @property
    def unanswered(self) -> bool:
        """Requests are in flight, one by one or in a run left QUIET."""
        return bool(self.in_flight or self.left)

    def unanswered_requests(self) -> list[Request]:
        """What to wait for until everything in flight is answered: the requests in flight,
        and the last of each run left (answered once the whole run is)."""
        return [*self.in_flight.values(), *(run.ends[run.end - 1] for run in self.left)]

    def leave(self, run: LeftRun) -> None:
        """A compiled run's requests, all QUIET, are in flight."""
        self.left.append(run)

    def _oldest(self) -> int | None:
        """The oldest unanswered request's ID."""
        ids = [self.left[0].first_id] if self.left else []
        if self.in_flight:
            ids.append(next(iter(self.in_flight)))  # requests go in flight in ID order
        return max(ids, key=lambda number: (self.next_id - number) % ID_MODULUS, default=None)

    def take_lone_request(self) -> Request | None:
        """The one request queued, a REGISTERS request, taken out for a compiled run to send
        first, where nothing else waits and none is in flight (its reply then comes in that
        run: no wake of its own). None otherwise."""
        queued = [*self.urgent, *self.waiting]
        if len(queued) != 1 or queued[0].type != F.Type.REGISTERS or self._loud_in_flight() or not self.opened:
            return None
        self.urgent.clear()
        self.waiting.clear()
        return queued[0]

    def heartbeat(self) -> None:
        """Say this host is still there (an ACK), so its session is not taken over; if
        nothing comes back, ask the board where it is, as for a request unanswered."""
        self.ack_owed = self.heartbeat_owed = True

    def take_pushed(self) -> Pushed:
        out, self.pushed = self.pushed, Pushed()
        return out

    # -- the network's side -----------------------------------------------------------------------

    def outgoing(self, now: float) -> list[bytes]:
        """Datagrams to send now: requests the board never saw, new requests while the
        window has room, recovery, acks."""
        while self.due and not self.recovering and self._room(self.due[0].id):
            request = self.due.popleft()
            if request.id in self.in_flight:  # not answered since: a late first copy ran after all
                self.resent += 1
                self._emit(request)
        while (self.urgent or self.waiting) and not self.due and self._room(self.next_id) and self.opened \
                and not self.recovering:
            request = (self.urgent or self.waiting).popleft()
            request.id, self.next_id = self.next_id, (self.next_id + 1) % ID_MODULUS
            request.sent_at = now
            self.requests += 1
            self.in_flight[request.id] = request
            self._emit(request)
        acks = int(self.ack_owed)
        if self.ack_owed:
            self._send.append(F.encode(F.Header(F.Type.ACK, session=self.session, ack=self.held_push)))
            self.ack_owed = False
        out, self._send = self._send, []
        # A push's ACK expects no answer (a lost one brings the push again): only what does
        # starts the retry timer. Each push used to bring a STATUS round trip after it.
        if (len(out) > acks or self.heartbeat_owed) and self.sent_at is None:
            self.sent_at = now
        self.heartbeat_owed = False
        if len(out) > acks and self.waiting_since is None:
            self.waiting_since = now
        return out

    def _room(self, number: int) -> bool:
        """ID ``number`` is within :attr:`window` (at most WINDOW) of the oldest unanswered
        one: the board still keeps the replies to everything in flight."""
        oldest = self._oldest()
        return oldest is None or (number - oldest) % ID_MODULUS < self.window

    def _loud_in_flight(self) -> bool:
        """A request in flight waits for a reply of its own (not QUIET)."""
        return any(not request.flags & F.FLAG_QUIET for request in self.in_flight.values())

    @property
    def patience(self) -> float:
        """Seconds after the last send or reply :meth:`timeout` waits: the retry time, or
        :data:`QUIET_PATIENCE` where only QUIET requests are in flight."""
        if self.recovering or not self.unanswered or self._loud_in_flight():
            return self.retry
        return max(self.retry, QUIET_PATIENCE)

    @property
    def deadline(self) -> float | None:
        """When :meth:`timeout` is due: :attr:`patience` after the last send or reply, or
        the end of :attr:`give_up`, whichever is first."""
        if self.sent_at is None:
            return None
        if self.waiting_since is None:
            return self.sent_at + self.patience
        return min(self.sent_at + self.patience, self.waiting_since + self.give_up)

    def timeout(self, now: float) -> None:
        """Nothing came back in time: ask where the board is (STATUS), or give up."""
        if self.sent_at is None:
            return
        if self.waiting_since is not None and now >= self.waiting_since + self.give_up:
            raise LinkError(self._silence(now))
        if now < self.sent_at + self.patience:
            return
        self.timer.back_off()
        self.sent_at = None
        if self.opening is not None and not self.opened:
            self._emit(self.opening)
        else:
            self.recovering = False
            self._ask_status()

    def receive(self, datagram: bytes, now: float) -> None:
        """One datagram from the board; raises LinkError when the session cannot go on."""
        self.received += 1
        try:
            header, body = F.decode(datagram)
        except F.FormatError:
            return
        self._take(header, body, now)
        if header.session == self.session and self.unanswered:
            self.ran_before(header.ack, now)  # its ack: the next ID the board expects

    def _take(self, header: F.Header, body: memoryview, now: float) -> None:
        self.heard_at = now
        if not self.unanswered and (self.opening is None or self.opened):
            self.waiting_since = None  # nothing owed: the board's word is progress enough
        if header.type == F.Type.EVENTS:
            self._push(header, body)
            return
        kind = header.type & ~F.REPLY
        if not header.type & F.REPLY:
            return
        if header.status == F.Status.NO_SESSION and kind != F.Type.STATUS:
            raise LinkError("the board lost this session: it was reset or reloaded, or another host "
                            "took it over")
        if kind == F.Type.OPEN:
            self._opened(header, bytes(body))
        elif kind == F.Type.STATUS:
            self._status(header, body, now)
        elif header.id not in self.in_flight:
            return  # a late copy: its request is answered already
        elif header.status == F.Status.OUT_OF_WINDOW:
            if kind == F.Type.RESEND and before(header.id, header.ack):
                raise LinkError(f"the reply to request {header.id} was lost and the board no longer keeps it")
            self._ask_status()
        else:
            if header.status == F.Status.NOT_OWNER:
                raise LinkError("another host owns the board now")
            request = self.in_flight[header.id]
            if not request.take(header, body):
                self.progress(now)  # a part of its reply: the board is working on it
                return
            del self.in_flight[header.id]
            if request.sent_at is not None:
                self.timer.sample(now - request.sent_at)
            self.grow(1)
            self.progress(now)

    def ran_before(self, expected: int, now: float, uploads: bool = False) -> bool:
        """The board runs requests in ID order and has run those before ``expected``: the
        QUIET ones among them are answered (an UPLOAD's reply is empty, a REGISTERS
        request's that only writes is each operation DONE with its value: neither needs
        the board's again), and with ``uploads`` every UPLOAD (a STATUS's answer). A reply's
        ``ack`` answers only QUIET ones: answering every UPLOAD slid the window on faster
        through loss and sent more again (249 against 208 of 460 through 10% loss,
        tests/test_link.py). True if any was."""
        answered = False
        for request in list(self.in_flight.values()):
            if not before(request.id, expected):
                break  # in flight in ID order
            if request.flags & F.FLAG_QUIET or uploads and request.type == F.Type.UPLOAD:
                if (reply := known_reply(request, self.session)) is not None:
                    del self.in_flight[request.id]
                    request.reply, answered = reply, True
        while self.left and before(self.left[0].first_id, expected):
            run, answered = self.left[0], True
            run.ran(min(run.count, (expected - run.first_id) % ID_MODULUS), self.session)
            if not run.count:
                self.left.popleft()
        if answered and not self.recovering:
            self.progress(now)
        return answered

    def progress(self, now: float) -> None:
        """A reply to what was in flight came: the silence ends."""
        self.sent_at = now if self.unanswered or self.recovering else None
        self.waiting_since = None if not self.unanswered else now

    def _silence(self, now: float) -> str:
        """Why the link gives up: the board is silent, or it answers but runs nothing (what
        is in flight never reaches it: too large for the path, most likely)."""
        if self.heard_at is None or now - self.heard_at > self.give_up or not self.unanswered:
            return f"no answer for {self.give_up:g} s"
        unanswered = len(self.in_flight) + sum(run.count for run in self.left)
        return (f"the board answers, but ran none of the {unanswered} requests sent to it in "
                f"{self.give_up:g} s (the largest {self.largest + F.IP_UDP_HEADERS} bytes as an IP datagram: "
                f"does the path to it carry datagrams that large?)")

    # -- inside ------------------------------------------------------------------------------------

    def _emit(self, request: Request) -> None:
        datagram = F.encode(F.Header(request.type, id=request.id, session=self.session, ack=self.held_push,
                                     value=request.value, flags=request.flags), request.body)
        self._send.append(datagram)
        self.largest = max(self.largest, len(datagram)) if self.in_flight else len(datagram)
        self.ack_owed = False

    def _ask_status(self) -> None:
        """Where is the board? Its STATUS reply's ``ack`` is the next ID it expects."""
        if not self.recovering:
            self.recovering = True
            self._send.append(F.encode(F.Header(F.Type.STATUS, session=self.session, ack=self.held_push)))
            self.ack_owed = False

    def _opened(self, header: F.Header, body: bytes) -> None:
        if self.opening is None or self.opened:
            return
        if header.status != F.Status.OK:
            owner = F.words(body[:12]) if len(body) >= 12 else [0, 0, 0]
            raise BoardInUse(f"the board is in use by {dotted_quad(owner[0])}:{owner[1]} (last heard "
                             f"{owner[2] / 1000:g} s ago by the board's clock)")
        self.opening.reply = (header, body)
        self.sent_at = self.waiting_since = None

    def _status(self, header: F.Header, body: memoryview, now: float) -> None:
        if header.session != self.session and self.opened:
            raise LinkError("the board lost this session: it was reset or reloaded, or another host "
                            "took it over")
        if self.want_snapshot:
            try:
                self.snapshot, self.want_snapshot = decode_snapshot(body), False
            except F.FormatError as exc:
                raise LinkError(str(exc)) from None
        if self.recovering:
            self.recovering = False
            self.sent_at = None
            self._recover(header.ack, now)

    def grow(self, replies: int) -> None:
        """``replies`` came in order: the window grows back towards :attr:`most`."""
        self.window = min(self.most, self.window + replies / self.window)

    def _recover(self, expected: int, now: float) -> None:
        """The board expects ``expected`` next: what it ran is answered (an UPLOAD's reply
        says nothing more than that it ran, so the STATUS is its answer: the quiet ones ask
        for none) or its reply asked for again; what it never saw is sent again. Where
        either was lost, fewer go in flight from now on (the board runs datagrams in the
        order they come, so a board that was only slow has sent every reply of what it ran
        before this STATUS's: that costs nothing but the STATUS)."""
        self.due.clear()
        self._one_by_one()
        lost = False
        if any(before(request.id, expected) for request in self.in_flight.values()):
            # The board ran some of it: progress, whatever became of the replies. A board that
            # runs nothing (the requests never reach it) is asked less and less often.
            self.timer.answered()
            self.waiting_since = now
        self.ran_before(expected, now, uploads=True)
        for request in self.in_flight.values():
            lost = True
            if before(request.id, expected):
                self.replays += 1
                self._send.append(F.encode(F.Header(F.Type.RESEND, id=request.id, session=self.session,
                                                    ack=self.held_push)))
            else:
                self.due.append(request)
            request.sent_at = None  # a reply from now on may answer either sending
        if lost:
            self.window = max(1.0, self.window / 2)
        if not self.in_flight:
            self.sent_at = self.waiting_since = None

    def _one_by_one(self) -> None:
        """The runs left in flight as requests of their own, in ID order, for a recovery."""
        if not self.left:
            return
        oldest = self._oldest()
        assert oldest is not None
        requests = [*self.in_flight.values(), *(request for run in self.left for request in run.requests())]
        self.in_flight = {r.id: r for r in sorted(requests, key=lambda r: (r.id - oldest) % ID_MODULUS)}
        self.left.clear()

    def _push(self, header: F.Header, body: memoryview) -> None:
        self.ack_owed = True
        if header.session != self.session or header.id != (self.held_push + 1) % ID_MODULUS:
            return  # a copy of one already held (its ack was lost), or not ours
        self.held_push = header.id
        self.pushed_body(body)

    def pushed_body(self, body: bytes | memoryview) -> None:
        """The next push in sequence: its events and control packets (a malformed body
        gives nothing; it is acknowledged all the same, as the board cannot mend it)."""
        try:
            events, packets = F.decode_events(body)
        except F.FormatError:
            self.malformed_pushes += 1
            return
        self.pushed.events += events
        self.pushed.packets += packets
