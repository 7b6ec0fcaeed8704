"""Two NETBLT endpoints across an emulated WAN, in virtual time.

Deterministic for a given seed and fast: no wall-clock waits. The protocol cores, the
data-path cores and the codec are the real ones; only the wire and the clock are not.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from ...driver.core import DataPathCore
from ...driver.framing import HEADER_SIZE
from ...protocol import events as ev
from ...protocol.connection import Connection
from ...protocol.endpoint import Admission, Endpoint, MemorySink, MemorySource, Source
from ...protocol.packets import Packet
from ...protocol.params import Params, Timing
from .netem import Path, PathConfig


class World:
    """A virtual clock and its event queue."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def at(self, when: float, fn: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (max(when, self.now), next(self._order), fn))

    def run(self, until: float, stop: Callable[[], bool]) -> None:
        while self._queue and not stop():
            when, _, fn = heapq.heappop(self._queue)
            if when > until:
                break
            self.now = when
            fn()


class SimDataPath(DataPathCore):
    """The data-path core with a simulated wire and a virtual clock; addresses are names."""

    def __init__(self, world: World, path: Path, address: str, local_port: int, foreign_port: int,
                 peer: str | None) -> None:
        super().__init__(local_port, foreign_port, peer)
        self.world, self.path, self.address = world, path, address
        self.wire: dict[str, SimSide] = {}
        """Who is at each address on this path's far end."""
        self._pump_at: float | None = None

    def transmit(self, packet: Packet, to: str) -> None:
        self._wire(self.encode(packet, to), to)

    def _wire(self, datagram: bytes, to: str) -> None:
        far = self.wire.get(to)
        for at, copy in self.path.send(datagram, self.world.now):
            if far is not None:
                self.world.at(at, lambda copy=copy: far.arrive(copy, self.address))

    def pump(self) -> None:
        """Send what the pacer allows now, and come back when the next burst is due."""
        self._pump_at = None
        now = self.world.now
        out = bytearray(HEADER_SIZE + self.params.packet_size + 3) if self.params else bytearray()
        while (packed := self.next_datagrams(now, out, 1)) is not None:
            self._wire(bytes(out[:packed[0]]), self.peer)
        if self.tx:
            self.schedule_pump(self.pacer.next_burst)

    def schedule_pump(self, when: float) -> None:
        if self._pump_at is None or when < self._pump_at:
            self._pump_at = when
            self.world.at(when, lambda: self._pump_at == when and self.pump())


class SimSide:
    """One endpoint in the world: its protocol core's timer and its data path's events."""

    def __init__(self, world: World, endpoint: Endpoint, datapath: SimDataPath) -> None:
        self.world, self.endpoint, self.dp = world, endpoint, datapath
        self._timer_at: float | None = None

    def arrive(self, datagram: bytes, source: str) -> None:
        self.dp.receive(memoryview(datagram), self.world.now, source)
        self.settle()

    def settle(self) -> None:
        """Feed data-path events to the protocol core until quiet, then re-arm timers and pump."""
        ep, now = self.endpoint, self.world.now
        while events := self.dp.take_events():
            for event in events:
                ep.handle(event, now)
        if ep.finished:
            return
        self.dp.schedule_pump(now)
        deadline = ep.conn.deadline
        if deadline is not None and deadline != self._timer_at:
            self._timer_at = deadline
            self.world.at(deadline, lambda: self._timer(deadline))

    def _timer(self, deadline: float) -> None:
        if self._timer_at != deadline or self.endpoint.finished:
            return
        self._timer_at = None
        self.dp.flush_report()
        self.settle()
        self.endpoint.timeout(self.world.now)
        self.settle()


@dataclass
class SimResult:
    ok: bool
    """Both ends report success; ``received`` is what the receiver's client got."""
    reason: str
    received: bytes
    sender: Endpoint
    receiver: Endpoint
    duration: float
    forward: Path
    backward: Path


def simulate(data: bytes, params: Params, *, forward: PathConfig = PathConfig(),
             backward: PathConfig = PathConfig(), seed: int = 1, timing: Timing = Timing(),
             receiver_params: Params | None = None, sender_active: bool = True,
             time_limit: float = 3600.0, source: Source | None = None,
             admit: Callable[[ev.Admit], Admission] | None = None) -> SimResult:
    """Move ``data`` from a data sender to a data receiver; ``forward`` carries the data.

    ``sender_active`` picks WRITE mode (the data sender opens) or READ mode. ``source``
    replaces the sender's client data (a stream, say); ``admit`` answers a passive
    receiver's :class:`~netblt.protocol.events.Admit`.
    """
    world = World()
    paths = Path(forward, seed), Path(backward, seed + 1)
    ports, names = (4001, 4002), ("sender", "receiver")
    sink = MemorySink()
    sides = []
    for i, is_sender in enumerate((True, False)):
        active = is_sender == sender_active
        far = names[1 - i] if active else None
        client = source or MemorySource(data)
        conn = Connection(active=active, sender=is_sender,
                          params=params if is_sender or receiver_params is None else receiver_params,
                          timing=timing, transfer_size=client.size if is_sender else 0,
                          client_string=b"sim", peer=far)
        dp = SimDataPath(world, paths[i], names[i], ports[i], ports[1 - i] if active else 0, far)
        ep = Endpoint(conn, dp, source=client if is_sender else None,
                      sink=None if is_sender else sink, admit=None if is_sender else admit)
        sides.append(SimSide(world, ep, dp))
    for i, side in enumerate(sides):
        side.dp.wire[names[1 - i]] = sides[1 - i]
    for side in sides:
        side.endpoint.start(world.now)
        side.settle()
    world.run(time_limit, stop=lambda: all(s.endpoint.finished for s in sides))
    sender, receiver = (s.endpoint for s in sides)
    results = [ep.progress.result for ep in (sender, receiver)]
    ok = all(r is not None and r.ok for r in results)
    reason = "; ".join(f"{name}: {r.reason if r else 'still running'}"
                       for name, r in zip(("sender", "receiver"), results))
    return SimResult(ok, reason, bytes(sink.data), sender, receiver, world.now, *paths)
