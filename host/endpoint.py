"""One end of a transfer: the engine, a data path, and the client's data.

Carries out the engine's actions on any data path (software, simulated or board) and
feeds the client's side back in. Both the real run loop and the virtual-time
simulation drive an :class:`Endpoint`; neither knows the protocol.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol

from . import events as ev
from .engine import Connection
from .packets import Packet
from .params import Params


class DataPath(Protocol):
    """The buffer-level interface every data path offers (docs/architecture.md)."""

    def configure(self, params: Params) -> None: ...
    def transmit(self, packet: Packet) -> None: ...
    def send_buffer(self, number: int, data: bytes | memoryview, last: bool) -> None: ...
    def resend(self, number: int, packets: tuple[int, ...]) -> None: ...
    def release(self, number: int) -> None: ...
    def set_rate(self, burst_size: int, burst_interval_ms: int) -> None: ...
    def stamp_high_ack(self, high_ack: int) -> None: ...
    def post_receive(self, number: int, capacity: int) -> None: ...
    def drop_receive(self, number: int) -> None: ...
    def query_missing(self, number: int) -> None: ...
    def take(self, number: int) -> memoryview: ...


class Source(Protocol):
    size: int

    def read(self, offset: int, length: int) -> bytes | memoryview: ...


class Sink(Protocol):
    def begin(self, peer_client_string: bytes) -> None: ...
    def write(self, offset: int, data: memoryview) -> None: ...


class MemorySource:
    def __init__(self, data: bytes) -> None:
        self.data, self.size = memoryview(data), len(data)

    def read(self, offset: int, length: int) -> memoryview:
        return self.data[offset:offset + length]


class MemorySink:
    def __init__(self) -> None:
        self.data = bytearray()

    def begin(self, peer_client_string: bytes) -> None:
        pass

    def write(self, offset: int, data: memoryview) -> None:
        end = offset + len(data)
        if len(self.data) < end:
            self.data.extend(bytes(end - len(self.data)))
        self.data[offset:end] = data


@dataclass
class Progress:
    """What a transfer has done so far, for progress bars and the final report."""

    bytes_done: int = 0
    """Bytes delivered (receiver) or acknowledged by OK (sender)."""
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


class Endpoint:
    def __init__(self, conn: Connection, datapath: DataPath, *, source: Source | None = None,
                 sink: Sink | None = None) -> None:
        self.conn, self.dp = conn, datapath
        self.source, self.sink = source, sink
        self.progress = Progress()
        self.cpu_start = 0.0

    @property
    def finished(self) -> bool:
        return self.conn.finished

    def start(self, now: float) -> None:
        self.cpu_start = time.process_time()
        if self.conn.active:
            self.run(self.conn.connect(now), now)

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
        dp, progress = self.dp, self.progress
        match action:
            case ev.Transmit(packet):
                dp.transmit(packet)
            case ev.SendBuffer(buffer=n, index=index, last=last):
                size = self.conn.params.buffer_size
                dp.send_buffer(n, self.source.read(index * size, size), last)
                if last:
                    progress.steady_end = now
            case ev.ResendPackets(buffer=n, packets=packets):
                dp.resend(n, packets)
            case ev.ReleaseSendBuffer(buffer=n, index=index):
                dp.release(n)
                size = self.conn.params.buffer_size
                progress.buffer_done(now, min(size, self.source.size - index * size))
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
            case ev.Deliver(buffer=n, index=index, size=size):
                return self._deliver(n, index, size, now)
            case ev.Established(params=params, peer_client_string=peer):
                self.cpu_start = time.process_time()
                dp.configure(params)
                progress.params = params
                progress.established_at = now
                if self.sink is not None:
                    try:
                        self.sink.begin(peer)
                    except OSError as exc:
                        return self.conn.quit(f"receiver cannot store the data: {exc.strerror or exc}", now)
            case ev.Finished():
                progress.result = action
        return []

    def _deliver(self, n: int, index: int, size: int, now: float) -> list[ev.Action]:
        try:
            self.sink.write(index * self.conn.params.buffer_size, self.dp.take(n))
        except OSError as exc:
            return self.conn.quit(f"receiver cannot store the data: {exc.strerror or exc}", now)
        self.dp.drop_receive(n)
        self.progress.buffer_done(now, size)
        return self.conn.handle(ev.BufferReleased(n), now)
