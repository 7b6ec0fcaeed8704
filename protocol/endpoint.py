"""One end of a transfer: the protocol core, a data path, and the client's data.

Carries out the protocol core's actions on any data path (software, simulated or board) and
feeds the client's side back in. Both the real run loop and the virtual-time
simulation drive an :class:`Endpoint`; neither knows the protocol.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from ..formats.born import BornBuffer
from . import events as ev
from .connection import Connection
from .packets import Packet
from .params import Params


class DataPathError(Exception):
    """The data path can no longer carry the connection (a board that stopped answering);
    the message is one line for the user. With ``tell_peer`` control packets still get
    through, so the peer hears the reason in an ABORT rather than from its death timer."""

    def __init__(self, reason: str, tell_peer: bool = False) -> None:
        super().__init__(reason)
        self.tell_peer = tell_peer


class DataPath(Protocol):
    """The buffer-level interface every data path offers (docs/architecture.md)."""

    def unusable(self, params: Params, transfer_size: int | None, sending: bool) -> str | None:
        """Why this data path cannot carry a connection with these final values, if it cannot."""

    def configure(self, params: Params, peer: ev.Address, transfer_size: int | None = None) -> None: ...
    def transmit(self, packet: Packet, to: ev.Address) -> None: ...
    def send_buffer(self, number: int, data: bytes | memoryview | BornBuffer, last: bool) -> None: ...
    def load_ahead(self, number: int, data: bytes | memoryview) -> None:
        """``data`` is likely to be buffer ``number``'s: a data path that loads buffers
        slowly may start now. The core still hands the buffer over with :meth:`send_buffer`."""
    def resend(self, number: int, packets: tuple[int, ...]) -> None: ...
    def release(self, number: int) -> None: ...
    def set_rate(self, burst_size: int, burst_interval_ms: int) -> None: ...
    def stamp_high_ack(self, high_ack: int) -> None: ...
    def post_receive(self, number: int, capacity: int) -> None: ...
    def drop_receive(self, number: int) -> None: ...
    def query_missing(self, number: int) -> None: ...
    def take(self, number: int) -> memoryview: ...


class Source(Protocol):
    size: int | None
    """Bytes in all; None for a stream until reading it finds its end. A source whose size
    is known gives any buffer, at any size, as often as asked."""

    def buffer(self, index: int, size: int) -> tuple[bytes | memoryview | BornBuffer, bool] | None:
        """The ``index``-th buffer of ``size`` bytes and whether it is the last; None past
        the end. The data stays valid until :meth:`release`; a born buffer
        (formats/born.py) asks the data path to make it."""

    def release(self, index: int) -> None: ...


class Sink(Protocol):
    def write(self, offset: int, data: memoryview) -> None: ...

    def problem(self) -> str | None:
        """Once every byte is in: why the data is not what the sender announced, if it is not."""


@dataclass(frozen=True)
class Admission:
    """A passive end's client's answer to :class:`~.events.Admit`."""

    refusal: str | None = None
    """Why the OPEN is refused; None admits it."""
    held: frozenset[int] = frozenset()
    """Buffers the receiver already holds (a resumed transfer)."""
    last: int | None = None
    resumed_bytes: int = 0
    client_string: bytes | None = None
    """For the RESPONSE, in place of the connection's own."""


class MemorySource:
    def __init__(self, data: bytes) -> None:
        self.data, self.size = memoryview(data), len(data)

    def buffer(self, index: int, size: int) -> tuple[memoryview, bool] | None:
        start = index * size
        if start > self.size or start == self.size and index:
            return None
        return self.data[start:start + size], start + size >= self.size

    def release(self, index: int) -> None:
        pass


class MemorySink:
    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, offset: int, data: memoryview) -> None:
        end = offset + len(data)
        if len(self.data) < end:
            self.data.extend(bytes(end - len(self.data)))
        self.data[offset:end] = data

    def problem(self) -> str | None:
        return None


@dataclass
class Progress:
    """What a transfer has done so far, for progress bars and the final report."""

    bytes_done: int = 0
    """Bytes delivered (receiver) or acknowledged by OK (sender) in this connection."""
    resumed_bytes: int = 0
    """Bytes the receiver held from an earlier, interrupted transfer: not sent again."""
    established_at: float | None = None
    steady_end: float | None = None
    """When the last buffer started: later time is end-of-transfer recovery (RFC 1030)."""
    done_at: list[tuple[float, int]] = field(default_factory=list)
    """(time, bytes) of each buffer delivered or acknowledged."""
    params: Params | None = None
    result: ev.Finished | None = None

    def buffer_done(self, now: float, size: int) -> None:
        self.bytes_done += size
        self.done_at.append((now, size))

    def steady_state_bps(self) -> float:
        """RFC 1030's steady-state throughput: buffers done between the first and the
        start of the last buffer, so neither set-up nor the final recovery counts."""
        end = self.steady_end if self.steady_end is not None else math.inf
        window = [(t, n) for t, n in self.done_at if t <= end]
        if len(window) < 3:
            window = self.done_at
        if len(window) < 2 or window[-1][0] <= window[0][0]:
            return self.real_bps()
        return 8 * sum(n for _, n in window[1:]) / (window[-1][0] - window[0][0])

    def real_bps(self) -> float:
        if not self.done_at or self.established_at is None:
            return 0.0
        elapsed = self.done_at[-1][0] - self.established_at
        return 8 * self.bytes_done / elapsed if elapsed > 0 else 0.0


class Usage(NamedTuple):
    """What the process has used so far: CPU seconds, and wakes (voluntary context switches)."""

    cpu: float = 0.0
    wakes: int = 0


class Endpoint:
    """``admit`` answers an acceptable OPEN (default: admit it); ``check_peer`` judges the
    peer's client string once established and says why to abort, if it must; ``usage``
    says what the process has used, read at the start and once established (``usage_start``)."""

    def __init__(self, conn: Connection, datapath: DataPath, *, source: Source | None = None,
                 sink: Sink | None = None, admit: Callable[[ev.Admit], Admission] | None = None,
                 refused: Callable[[ev.Admit, str], None] | None = None,
                 check_peer: Callable[[bytes], str | None] | None = None,
                 usage: Callable[[], Usage] = Usage) -> None:
        self.conn, self.dp = conn, datapath
        self.source, self.sink = source, sink
        self.admit, self.check_peer = admit, check_peer
        self.refused = refused
        """Told of an OPEN the data path turns down (the client's ``admit`` never sees it)."""
        self.progress = Progress()
        self.usage = usage
        self.usage_start = Usage()

    @property
    def finished(self) -> bool:
        return self.conn.finished

    @property
    def _source(self) -> Source:
        assert self.source is not None, "a sending endpoint has a source"
        return self.source

    @property
    def _sink(self) -> Sink:
        assert self.sink is not None, "a receiving endpoint has a sink"
        return self.sink

    def start(self, now: float) -> None:
        self.usage_start = self.usage()
        if self.conn.active:
            self.run(self.conn.connect(now), now)
            if self.conn.is_sender:
                self._load_first()

    def handle(self, event: ev.Event, now: float) -> None:
        if isinstance(event, ev.FirstPacket) and event.last_buffer and self.progress.steady_end is None:
            self.progress.steady_end = now
        self.run(self.conn.handle(event, now), now)

    def timeout(self, now: float) -> None:
        self.run(self.conn.handle_timeout(now), now)

    def run(self, actions: list[ev.Action], now: float) -> None:
        work = list(actions)
        while work:
            action = work.pop(0)
            follow = self._do(action, now)
            work.extend(follow)

    def _do(self, action: ev.Action, now: float) -> list[ev.Action]:
        dp, progress, conn = self.dp, self.progress, self.conn
        match action:
            case ev.Transmit(packet, to):
                dp.transmit(packet, to)
            case ev.SendBuffer(buffer=n, index=index, last=last):
                return self._send(n, index, last, now)
            case ev.ResendPackets(buffer=n, packets=packets):
                dp.resend(n, packets)
            case ev.ReleaseSendBuffer(buffer=n, index=index, sent=sent):
                dp.release(n)
                self._source.release(index)
                size = conn.params.buffer_size
                size = size if self._source.size is None else min(size, self._source.size - index * size)
                if sent:
                    progress.buffer_done(now, size)
                else:
                    progress.resumed_bytes += size
            case ev.SetRate(burst_size=bs, burst_interval=bi):
                dp.set_rate(bs, bi)
            case ev.StampHighAck(high_ack=h):
                dp.stamp_high_ack(h)
            case ev.PostReceive(buffer=n, capacity=capacity):
                dp.post_receive(n, capacity)
            case ev.DropReceive(buffer=n):
                dp.drop_receive(n)
            case ev.QueryMissing(buffer=n):
                dp.query_missing(n)
            case ev.Deliver(buffer=n, index=index, size=size, final=final):
                return self._deliver(n, index, size, final, now)
            case ev.Admit(params=params, transfer_size=size):
                if why := dp.unusable(params, size, conn.is_sender):
                    if self.refused:
                        self.refused(action, why)
                    return conn.refuse(why, now)
                answer = self.admit(action) if self.admit else Admission()
                if answer.refusal is not None:
                    return conn.refuse(answer.refusal, now)
                progress.resumed_bytes = answer.resumed_bytes
                return conn.admit(now, held=answer.held, last=answer.last, client_string=answer.client_string)
            case ev.Established(params=params, peer_client_string=peer_string, peer=peer, transfer_size=size):
                self.usage_start = self.usage()
                progress.params = params
                progress.established_at = now
                if why := dp.unusable(params, size, conn.is_sender):
                    return conn.abort(why, now)
                dp.configure(params, peer, size)
                if self.check_peer and (why := self.check_peer(peer_string)):
                    return conn.abort(why, now)
            case ev.Finished():
                progress.result = action
        return []

    def lost_data_path(self, reason: str) -> None:
        """The data path failed: the connection ends here, since nothing can reach the peer."""
        self.conn.finish(False, reason)
        self.progress.result = self.conn.result

    def _load_first(self) -> None:
        """Let the data path load the first buffer while the OPEN is out (a board's upload
        of 4 MiB is 43 ms). Only from a source that can give it again at the size the
        RESPONSE settles on; an error reading it is reported when the buffer is due."""
        if self._source.size is None:
            return
        try:
            found = self._source.buffer(0, self.conn.params.buffer_size)
        except OSError:
            return
        if found is not None and not isinstance(found[0], BornBuffer):
            self.dp.load_ahead(1, found[0])

    def _send(self, n: int, index: int, last: bool, now: float) -> list[ev.Action]:
        """Load a buffer from the client; a stream's client says where its data ends."""
        try:
            found = self._source.buffer(index, self.conn.params.buffer_size)
        except OSError as exc:
            return self.conn.quit(f"sender cannot read its data: {exc.strerror or exc}", now)
        if found is None:  # GO'd past a stream's end, which is now known
            assert self._source.size is not None
            buffers = max(1, math.ceil(self._source.size / self.conn.params.buffer_size))
            return self.conn.handle(ev.LastBuffer(buffers), now)
        data, ends = found
        self.dp.send_buffer(n, data, last or ends)
        if last or ends:
            self.progress.steady_end = now
        return self.conn.handle(ev.LastBuffer(n), now) if ends and not last else []

    def _deliver(self, n: int, index: int, size: int, final: bool, now: float) -> list[ev.Action]:
        try:
            self._sink.write(index * self.conn.params.buffer_size, self.dp.take(n))
            problem = self._sink.problem() if final else None
        except OSError as exc:
            return self.conn.quit(f"receiver cannot store the data: {exc.strerror or exc}", now)
        self.dp.drop_receive(n)
        self.progress.buffer_done(now, size)
        if problem:
            return self.conn.quit(problem, now)  # the sender hears why, rather than a false success
        return self.conn.handle(ev.BufferReleased(n), now)
