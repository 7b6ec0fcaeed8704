"""The host link over a UDP socket (docs/host-link.md): a :class:`~.link_client.LinkClient`
(the protocol, sans I/O) on a socket, the MTU it takes (probed: link_mtu.py), and the bulk
path (driver/_linkpath.c: a slot's uploads or downloads with no Python a datagram)."""

from __future__ import annotations

import errno
import select
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..formats import host_link as F
from .compiled import linkpath
from .link_client import QUIET_PATIENCE, LinkClient, LinkError
from .link_mtu import JUMBO, reaches
from .link_requests import ID_MODULUS, LeftRun, Part, Request, known_reply
from .transport import (GSO_MAX_BYTES, GSO_MAX_SEGMENTS, IP_MTU_DISCOVER, IPV6_MTU_DISCOVER, MTU, PMTUDISC_DO,
                        coalesce, segmented, show, waiting_datagrams)


if TYPE_CHECKING:
    from ._linkpath import BulkRun

if linkpath is not None:
    linkpath.layout(tuple((F.HEADER.field(name).offset, F.HEADER.field(name).width) for name in (
                         # the order of the C code's field enum
                         "version", "type", "status", "flags", "id", "ack", "session", "value")),
                     F.HEADER.end, F.VERSION, F.REPLY, F.Type.EVENTS, F.Type.REGISTERS, F.Type.UPLOAD,
                     F.Type.DOWNLOAD, F.Status.OK, F.FLAG_QUIET)

LEAVE_TAIL, LEAVE_FIRST = 1, 2
"""driver/_linkpath.c's ``leave``: a run that fits the window, its last request one that
only writes (a SEND), goes QUIET and returns once sent, its first request too where that
only writes (the reply of one that writes is what it wrote)."""

RECEIVE_BUFFER = 4 << 20
"""Asked of the host link's socket: a window of replies arrives at line rate, 32 jumbo
DOWNLOADs at once. The kernel grants at most net.core.rmem_max; with less, the window
is made to fit what it holds (dropped replies cost a recovery each)."""


class BoardLink:
    """A host-link session with the board at ``address``, over a UDP socket.

    :meth:`submit` queues requests without waiting (the board runs them in order, so a
    command may follow the upload it needs at once); :meth:`wait` and the synchronous
    helpers run the link until their replies are in; :meth:`step` waits for whatever comes.
    ``mtu``: the largest IP datagram to send the board; :meth:`fit_mtu` learns it.
    """

    def __init__(self, address: tuple[str, int], *, give_up: float = 3.0, mtu: int = MTU) -> None:
        self.address = address
        self.shown = show(address)
        self.client = LinkClient(give_up=give_up)
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.connect(address)
        self.sock.setblocking(False)
        # Never fragmented: a board takes whole frames only (a datagram too large for this
        # host's interface fails at once with EMSGSIZE instead).
        if family == socket.AF_INET:
            self.sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, PMTUDISC_DO)
        else:
            self.sock.setsockopt(socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER, PMTUDISC_DO)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        # A board's replies of one size, back to back, come in one read where the kernel
        # joins them: one system call and one buffer for up to 64 (a DOWNLOAD's).
        coalesce(self.sock)
        self._set_mtu(mtu)
        self.poller = select.poll()
        self.poller.register(self.sock, select.POLLIN)
        self.offload = True
        """Runs of equal-sized datagrams go out in one system call (UDP segmentation
        offload) until the kernel refuses it once."""
        self.bytes_out = self.bytes_in = 0
        """UDP payload bytes sent to and received from the board."""
        self.sent_at = time.monotonic()
        """When this host last sent the board anything."""
        self.deadline: float | None = None
        """Past this (host time), every wait is an error: a host told to stop has only a
        moment left to tell the board and its peer."""

    def _set_mtu(self, mtu: int) -> None:
        """Requests up to ``mtu`` bytes, and as many in flight as the socket holds replies
        of: a window of requests, a DOWNLOAD's several replies each."""
        self.mtu = mtu
        held = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // (2 * (mtu + 1024))
        self.client.most = self.client.window = float(max(1, min(F.WINDOW, held)))
        self.parts = max(1, min(F.DOWNLOAD_PARTS, held // F.WINDOW, F.DOWNLOAD_MOST // F.max_words(mtu)))
        """Reply datagrams a DOWNLOAD asks for."""

    def open(self, take_over: bool = False) -> None:
        self.client.open(take_over)
        self._run(lambda: self.client.opened)

    def fit_mtu(self, asked: int | None) -> None:
        """Send the board datagrams of ``asked`` bytes, or without it of :data:`JUMBO` bytes
        where they reach it and Ethernet's 1500 where not; raises LinkError naming both
        sizes when ``asked`` does not reach it (a wrong MTU was a storm of requests that
        never arrived, while the board answered every small STATUS)."""
        sizes = [asked] if asked else [JUMBO]
        if sizes[0] > MTU:
            sizes.append(MTU)
        try:
            reached = reaches(self.sock, sizes, self.client.give_up)
        except ConnectionRefusedError:
            raise self._gone() from None
        if reached is None:
            raise LinkError(f"board {self.shown}: no answer for {self.client.give_up:g} s")
        if asked and not reached[asked]:
            other = next((size for size in sizes[1:] if reached[size]), None)
            below = f"; {other}-byte ones do: give --link-mtu {other}, or leave it out" if other else ""
            raise LinkError(f"board {self.shown}: {asked}-byte datagrams do not reach it (--link-mtu {asked}){below}")
        self._set_mtu(next((size for size in sizes if reached[size]), MTU))

    def submit(self, requests: F.Requests, join: bool = False, urgent: bool = False,
               quiet: bool = False) -> list[Request | Part]:
        """Queue requests; they go out as the window allows while the link runs (urgent
        ones first, quiet ones unanswered: :meth:`LinkClient.submit`)."""
        return [self.client.submit(kind, body, value, join, urgent, quiet) for kind, body, value in requests]

    def wait(self, requests: list[Request | Part]) -> list[tuple[F.Header, bytes]]:
        self._run(lambda: all(r.reply is not None for r in requests))
        return [r.answer for r in requests]

    def run(self, kind: F.Type, body: bytes = b"", value: int = 0) -> tuple[F.Header, bytes]:
        return self.many([(kind, body, value)])[0]

    def many(self, requests: F.Requests) -> list[tuple[F.Header, bytes]]:
        """Several requests pipelined (up to the window in flight); their replies in order."""
        return self.wait(self.submit(requests))

    def status(self) -> dict[str, int]:
        """Every register that does not pop, by name; needs no session."""
        self.client.ask_status()
        self._run(lambda: self.client.snapshot is not None)
        assert self.client.snapshot is not None
        return self.client.snapshot

    def upload(self, word_address: int, data: bytes | memoryview, then: Request | None = None) -> None:
        """``data`` into transmit slot memory from ``word_address`` on, once every request
        queued before it has run, and the REGISTERS request ``then`` just after, in the same
        run (a SEND of the slot). Compiled, a run that fits the window goes out QUIET and
        this returns as it is sent, the requests in flight until a later datagram's ``ack``
        says they ran (the push of the slot's SENT event: no wake for a reply); else once
        the board holds it all, with ``then``'s reply in it."""
        self._bulk(F.Type.UPLOAD, word_address, data, None, then)

    def download(self, word_address: int, size: int, first: Request | None = None) -> bytearray:
        """``size`` bytes of receive slot memory from ``word_address`` on, once every
        request queued before has run; the REGISTERS request ``first`` runs just before
        them, in the same run (the reads that say the slot is whole, with no round trip of
        their own); returns with ``first``'s reply in it. The bytes are the caller's (not
        copied again: a buffer's worth a download)."""
        out = bytearray(size)
        self._bulk(F.Type.DOWNLOAD, word_address, out, first)
        return out

    def _bulk(self, kind: F.Type, word_address: int, data: bytes | memoryview | bytearray,
              first: Request | None, last: Request | None = None) -> None:
        """``first``, a run of UPLOADs or DOWNLOADs and ``last``, compiled
        (driver/_linkpath.c) where it was built: one run, or where the link needed its
        recovery (a silence, a loss) several, the client recovering what a run left in
        flight and the next going on from there. (The rest of a slot once went through the
        client, a request and a reply at a time in Python: on a board that answered late,
        nearly every request of a slot.)"""
        if linkpath is None:
            self._bulk_requests(kind, word_address, data, first, last)
            return
        client, step, view, at = self.client, F.max_words(self.mtu), memoryview(data), 0
        first = first or client.take_lone_request()  # a register write queued meanwhile: no wait of its own
        while True:
            here = word_address + at // 4
            specs = F.BulkRequests(kind, here, view[at:], step, first.body if first else None, self.parts,
                                   last.body if last else None)
            self._run(lambda: client.hands_over(len(specs)))  # the run takes the next IDs
            leave = 0
            if last is not None and F.writes_only(last.body) and len(specs) <= client.room():
                # It goes whole and reads nothing: none of it need wake the host.
                leave = LEAVE_TAIL | (LEAVE_FIRST if first is None or F.writes_only(first.body) else 0)
            try:
                run = linkpath.bulk(self.sock.fileno(), int(kind), client.session, client.held_push, client.next_id,
                                     client.room(), here, view[at:], step, client.retry,
                                     first.body if first else None, self.offload, self.parts,
                                     last.body if last else None, leave, QUIET_PATIENCE if leave else 0.0)
            except ConnectionRefusedError:
                raise self._gone() from None
            for request, reply in ((first, run["first"]), (last, run["last"])):
                if request is not None and reply is not None:
                    header, body = F.decode(reply)
                    request.reply = (header, bytes(body))
            rest = self._take_over(run, specs, first, last)
            self.wait([request for _, request in rest if not request.flags & F.FLAG_QUIET])
            self._answered(specs, [(index, request.answer) for index, request in rest if request.reply is not None],
                           first, last, view, at)
            if run["next"] == len(specs):
                return
            at += specs.offset(run["next"])
            first = None

    def _bulk_requests(self, kind: F.Type, word_address: int, data: bytes | memoryview | bytearray,
                       first: Request | None, last: Request | None) -> None:
        """The same as requests of the client's, one Python step a datagram (no compiler)."""
        specs = F.BulkRequests(kind, word_address, memoryview(data), F.max_words(self.mtu),
                               first.body if first else None, self.parts, last.body if last else None)
        requests = [self.client.submit(*specs[index]) for index in range(len(specs))]
        self.wait(requests)
        self._answered(specs, [(index, request.answer) for index, request in enumerate(requests)], first, last,
                       memoryview(data), 0)

    @staticmethod
    def _answered(specs: F.BulkRequests, replies: list[tuple[int, tuple[F.Header, bytes]]], first: Request | None,
                  last: Request | None, view: memoryview, at: int) -> None:
        """Replies to ``specs``' requests (by index), each where it belongs: ``first``'s and
        ``last``'s to them, a download's words into ``view`` (``specs`` from ``at`` on)."""
        for index, reply in replies:
            if first is not None and index == 0:
                first.reply = reply
            elif last is not None and index == len(specs) - 1:
                last.reply = reply
            elif specs.kind == F.Type.DOWNLOAD:
                start = at + specs.offset(index)
                view[start:start + 4 * specs.stride] = reply[1][:len(view) - start]

    def _take_over(self, run: BulkRun, specs: F.BulkRequests, first: Request | None,
                   last: Request | None) -> list[tuple[int, Request]]:
        """The client's state after a compiled run: its IDs, pushes, bytes and round trips;
        the requests it sent but saw no answer to, in flight (by their index in ``specs``;
        the QUIET ones ``first`` and ``last`` themselves, answered where they are waited
        for); and what came that the run could not take, given to the client."""
        client, now = self.client, time.monotonic()
        self.bytes_out += run["bytes_out"]
        self.bytes_in += run["bytes_in"]
        self.offload = run["offload"]
        client.requests += run["next"]
        answered = run["next"] - len(run["waiting"])
        client.grow(answered)
        first_id, client.next_id = client.next_id, (client.next_id + run["next"]) % ID_MODULUS
        if answered:  # one sample a run, its slowest: a run's many quick replies would hide a board's slow spells
            client.timer.sample(run["slowest"])
        for body in run["pushes"]:
            client.pushed_body(body)
        client.held_push = run["held"]
        if run["next"]:  # its requests carried the acknowledgement, up to the push held when it last sent
            client.ack_owed = run["acked"] != run["held"]
        else:
            client.ack_owed |= bool(run["pushes"])
        rest, waiting, count = [], run["waiting"], len(specs)
        ends = {index: request for index, request in ((0, first), (count - 1, last)) if request is not None}
        answered_below = waiting[0][0] if waiting else run["next"]  # the board ran all before it
        for index, request in ends.items():
            if index < run["next"]:
                request.id = (first_id + index) % ID_MODULUS
            if request.reply is None and index < answered_below:
                request.reply = known_reply(request, client.session)  # QUIET, and an ack said it ran
        if run["stopped"] is None and waiting and len(waiting) == count - answered_below:
            # The run's end, sent QUIET (leaving, the run waits for no other) and left: one record.
            client.leave(LeftRun(waiting[0][1], specs.kept(), answered_below, count, waiting[0][2], ends))
            waiting = []
        for index, number, sent_at, quiet in waiting:
            request = ends[index] if quiet and index in ends else Request(*specs[index])
            request.id, request.sent_at = number, sent_at  # a late reply times the wait
            request.flags = F.FLAG_QUIET if quiet else 0
            client.in_flight[number] = request
            rest.append((index, request))
        if answered:
            client.waiting_since = None
        if client.unanswered:
            client.largest = F.HEADER.end + max([len(request.body) for request in client.in_flight.values()]
                                                + [4 * left.specs.step for left in client.left])
            # The run waited a retry time for them already: recovery starts at once.
            client.sent_at = now - client.retry if run["stopped"] == "timeout" else now
            client.waiting_since = client.waiting_since or client.sent_at
        if run["ack"] is not None:
            client.ran_before(run["ack"], now)
        try:
            for datagram in run["others"]:
                client.receive(datagram, now)
        except LinkError as exc:
            raise type(exc)(f"board {self.shown}: {exc}") from None
        if run["next"]:
            self.sent_at = now
        return rest

    def close(self) -> None:
        self.sock.close()

    def _gone(self) -> LinkError:
        """Nothing listens on the host link's port (ICMP port unreachable)."""
        if self.client.opened:
            return LinkError(f"board {self.shown} went away: nothing listens on its host link any more "
                             "(a simulated board stopped, or the board's port changed)")
        return LinkError(f"no board at {self.shown}: nothing listens on that port")

    def _run(self, done: Callable[[], bool]) -> None:
        """Steps until ``done``; what waits to go first, as that may be all it needs (a
        compiled run may start once the requests queued before it have gone: waiting for a
        datagram then cost a round trip and a wake)."""
        while not done():
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise LinkError(f"board {self.shown}: no time left to hear from it")
            self.flush()
            if not done():
                self.step(self.deadline)

    def flush(self) -> None:
        """Send what the client has to send now."""
        datagrams = self.client.outgoing(time.monotonic())
        if datagrams:
            self._send(datagrams)
            self.sent_at = time.monotonic()

    def step(self, until: float | None) -> None:
        """Send what waits, then take everything that came, waiting for the first datagram
        until ``until``, the client's retry deadline or half a second, whichever is first."""
        client = self.client
        try:
            self.flush()
            came = self._receive()
            if not came:
                limit = min(x for x in (client.deadline, until, time.monotonic() + 0.5) if x is not None)
                if not self.poller.poll(max(0.0, limit - time.monotonic()) * 1000 or 0.1):
                    client.timeout(time.monotonic())
                    return
                came = self._receive()
            now = time.monotonic()
            for datagram in came:
                client.receive(datagram, now)
        except ConnectionRefusedError:
            raise self._gone() from None
        except LinkError as exc:
            raise type(exc)(f"board {self.shown}: {exc}") from None

    def _send(self, datagrams: list[bytes]) -> None:
        """Each datagram as it is; a run of equal-sized ones (an upload's) in one call where
        the kernel segments it. A datagram the socket has no room for is as good as lost:
        the link recovers it."""
        at = 0
        while at < len(datagrams):
            size, end = len(datagrams[at]), at + 1
            most = min(GSO_MAX_SEGMENTS, GSO_MAX_BYTES // size) if self.offload else 1
            while end < len(datagrams) and end - at < most and len(datagrams[end]) == size:
                end += 1
            try:
                if end - at > 1:
                    self.sock.sendmsg(datagrams[at:end], segmented(size))
                else:
                    self.sock.send(datagrams[at])
            except BlockingIOError:
                pass
            except OSError as exc:
                if end - at == 1 or exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.EIO):
                    raise
                self.offload = False  # no segmentation offload here: one call a datagram
                continue
            else:
                self.bytes_out += size * (end - at)
            at = end

    def _receive(self) -> list[bytes]:
        """Every datagram waiting on the socket, without blocking (those a read coalesced
        each as it was sent)."""
        came = waiting_datagrams(self.sock)
        self.bytes_in += sum(map(len, came))
        return came
