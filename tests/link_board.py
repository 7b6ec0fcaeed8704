"""The board's functional model (sim/model) for the host's tests: in virtual time through
a lossy link, and served on loopback in a thread."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Callable

from netblt.formats.boards import SIMULATION, SlotGeometry
from netblt.sim.model.engine_model import EngineModel
from netblt.sim.model.host_link import HostLink
from netblt.sim.model.serve import Served

Address = tuple[str, int]


def board_model(geometry: SlotGeometry = SIMULATION) -> HostLink:
    """The board's functional model (sim/model): its host link, in front of its engine."""
    return HostLink(EngineModel(geometry))


class LossyLink:
    """Datagrams between a client and the model through a seeded lossy path, in virtual time."""

    def __init__(self, board: HostLink, seed: int, loss: float = 0.0, duplicate: float = 0.0,
                 reorder: float = 0.0, delay: float = 0.0002) -> None:
        self.board, self.random = board, random.Random(seed)
        self.loss, self.duplicate, self.reorder, self.delay = loss, duplicate, reorder, delay
        self.now = 0.0
        self.in_air: list[tuple[float, int, str, bytes]] = []
        self._order = 0

    def _send(self, to: str, datagram: bytes) -> None:
        for _ in range(2 if self.random.random() < self.duplicate else 1):
            if self.random.random() < self.loss:
                continue
            extra = self.delay * 3 if self.random.random() < self.reorder else 0.0
            self._order += 1
            self.in_air.append((self.now + self.delay + extra, self._order, to, datagram))

    def run(self, client, until: Callable[[], bool], source: Address = ("10.0.0.2", 40000),
            limit: float = 60.0, push_every: float = 0.002) -> None:
        next_push = push_every
        while not until():
            if self.now > limit:
                raise AssertionError("the link made no progress in virtual time")
            for datagram in client.outgoing(self.now):
                self._send("board", datagram)
            due = [d for d in self.in_air if d[0] <= self.now]
            self.in_air = [d for d in self.in_air if d[0] > self.now]
            for _, _, to, datagram in sorted(due):
                if to == "board":
                    for answer in self.board.receive(datagram, source, self.now) + self.board.pushes(self.now):
                        self._send("host", answer)
                else:
                    client.receive(datagram, self.now)
            if self.now >= next_push:
                next_push += push_every
                for answer in self.board.pushes(self.now):
                    self._send("host", answer)
            client.timeout(self.now)
            self.now += 0.0001


class ServedBoard:
    """``netblt sim-board --model`` in a thread, for programs that reach a board by address."""

    def __init__(self, geometry: SlotGeometry = SIMULATION, **settings) -> None:
        self.served = Served(geometry, SETTINGS | settings)
        self.link, self.engine = self.served.link, self.served.engine
        self.port = self.served.link_socket.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.netblt_port = self.served.netblt_port
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.served.run, args=(self.stopped.is_set,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.served.close()


SETTINGS = {"link_port": 0, "netblt_port": 0, "mtu": 9000, "wan_delay": 0.0, "wan_loss": 0.0, "wan_seed": 1}


class LossyRelay:
    """A UDP relay on loopback between one host and a served board that loses, duplicates
    and holds back datagrams each way, seeded: for the host link's socket code."""

    def __init__(self, board_port: int, seed: int, loss: float = 0.1, duplicate: float = 0.05,
                 reorder: float = 0.05) -> None:
        self.board = ("127.0.0.1", board_port)
        self.random = random.Random(seed)
        self.loss, self.duplicate, self.reorder = loss, duplicate, reorder
        self.host: Address | None = None
        self.held: list[tuple[bytes, Address]] = []
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.01)
        self.port = self.socket.getsockname()[1]
        self.counts = {"lost": 0, "duplicated": 0, "held back": 0}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            try:
                datagram, source = self.socket.recvfrom(65536)
            except TimeoutError:
                self._release()
                continue
            if source != self.board:
                self.host = source
            self._forward(datagram, self.host if source == self.board else self.board)

    def _forward(self, datagram: bytes, to: Address) -> None:
        if self.random.random() < self.loss:
            self.counts["lost"] += 1
            return
        if self.random.random() < self.reorder:
            self.counts["held back"] += 1
            self.held.append((datagram, to))
            return
        for _ in range(2 if self.random.random() < self.duplicate else 1):
            self.socket.sendto(datagram, to)
        self._release()

    def _release(self) -> None:
        held, self.held = self.held, []
        for datagram, to in held:
            self.socket.sendto(datagram, to)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.socket.close()
