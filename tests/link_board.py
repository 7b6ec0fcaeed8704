"""A board's side of the host link in Python: docs/host-link.md's rules as a test model.

It is what the host's client is tested against before and beside the gateware: the
same rules, with a register file whose EVENT register pops a FIFO (so a repeated
execution shows) and two slot memories. It logs every execution.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable

from netblt.formats import host_link as F
from netblt.formats.registers import ADDRESS, ENGINE_REGISTERS, LINK_REGISTERS, REGISTER_MAP

EVENT_REGISTER = 0x10
"""Reads pop ``fifo`` here, as the engine's EVENT register does."""

Address = tuple[str, int]


class BoardModel:
    def __init__(self, memory_words: int = 4096, takeover_after: float = 10.0) -> None:
        self.session = 0
        self.owner: Address | None = None
        self.owner_heard = 0.0
        self.expected = 1
        self.stored: dict[int, bytes] = {}
        """Replies to the last WINDOW executed requests, by ID."""
        self.registers: dict[int, int] = {}
        self.fifo: deque[int] = deque()
        self.tx_memory = bytearray(4 * memory_words)
        self.rx_memory = bytearray(4 * memory_words)
        self.executed: list[tuple[int, int]] = []
        """(request ID, type) of every execution."""
        self.takeover_after = takeover_after
        self.pushes: deque[tuple[list[int], list[F.ControlPacket]]] = deque()
        self.push_number = 0
        self.push_sent: bytes | None = None
        self.push_acked = 0
        self.counts = {"refused": 0, "replayed": 0, "stale": 0, "malformed": 0}

    def reset(self) -> None:
        """Power cycled: every session and stored reply is gone."""
        self.session, self.owner, self.expected, self.stored = 0, None, 1, {}
        self.push_sent, self.push_number, self.push_acked = None, 0, 0

    def reply(self, header: F.Header, status: F.Status = F.Status.OK, body: bytes = b"") -> bytes:
        return F.encode(F.Header(header.type | F.REPLY, id=header.id, session=self.session, ack=self.expected,
                                 status=status, value=header.value), body)

    def receive(self, datagram: bytes, source: Address, now: float) -> list[bytes]:
        try:
            header, body = F.decode(datagram)
        except F.FormatError:
            self.counts["malformed"] += 1
            return []
        if header.type == F.Type.STATUS:
            return [self.reply(header, body=self._snapshot())]
        if header.type == F.Type.OPEN:
            return [self._open(header, source, now)]
        if header.session != self.session or not self.session:
            self.counts["stale"] += 1
            return [self.reply(header, F.Status.NO_SESSION)]
        if source != self.owner:
            self.counts["refused"] += 1
            return [self.reply(header, F.Status.NOT_OWNER)]
        self.owner_heard = now
        self._acked(header.ack)
        if header.type == F.Type.ACK:
            return self._push_now()
        if header.type == F.Type.RESEND:
            stored = self.stored.get(header.id)
            self.counts["replayed" if stored else "stale"] += 1
            return [stored or self.reply(header, F.Status.OUT_OF_WINDOW)]
        if header.id != self.expected:
            stored = self.stored.get(header.id)
            self.counts["replayed" if stored else "stale"] += 1
            return [stored or self.reply(header, F.Status.OUT_OF_WINDOW)]
        answer = self._execute(header, bytes(body))
        self.executed.append((header.id, header.type))
        self.expected = (self.expected + 1) % (1 << 16)
        self.stored[header.id] = answer = self.reply(header, *answer)
        self.stored.pop((header.id - F.WINDOW) % (1 << 16), None)
        return [answer, *self._push_now()]

    def _open(self, header: F.Header, source: Address, now: float) -> bytes:
        silent = now - self.owner_heard
        taking_over = header.flags & F.FLAG_TAKE_OVER and silent > self.takeover_after
        if self.owner in (None, source) or taking_over:
            if header.session != self.session:
                self.session, self.expected, self.stored = header.session, 1, {}
                self.push_number, self.push_acked, self.push_sent = 0, 0, None
            self.owner, self.owner_heard = source, now
            status = F.Status.OK
        else:
            self.counts["refused"] += 1
            status = F.Status.NOT_OWNER
        owner = self.owner or ("0.0.0.0", 0)
        body = struct.pack(">III", int.from_bytes(bytes(map(int, owner[0].split("."))), "big"), owner[1],
                           int(1000 * silent))
        return self.reply(header, status, body)

    def _execute(self, header: F.Header, body: bytes) -> tuple[F.Status, bytes]:
        if header.type == F.Type.REGISTERS:
            done = []
            for op in F.decode_operations(body):
                if op.opcode == F.Opcode.WRITE:
                    self.registers[op.register] = op.value
                    done.append(F.Operation(op.opcode | F.DONE, op.register, op.value))
                elif op.opcode == F.Opcode.READ:
                    value = (self.fifo.popleft() if self.fifo else 0) if op.register == EVENT_REGISTER \
                        else self.registers.get(op.register, 0)
                    done.append(F.Operation(op.opcode | F.DONE, op.register, value))
                else:
                    done.append(op)
            return F.Status.OK, F.encode_operations(done)
        if header.type == F.Type.UPLOAD:
            self.tx_memory[4 * header.value:4 * header.value + len(body)] = body
            return F.Status.OK, b""
        if header.type == F.Type.DOWNLOAD:
            count = F.words(body)[0]
            return F.Status.OK, bytes(self.rx_memory[4 * header.value:4 * (header.value + count)])
        return F.Status.MALFORMED, b""

    def _snapshot(self) -> bytes:
        """REGISTER_MAP, the engine registers that do not pop (by address), the link's."""
        engine = [self.registers.get(i, 0) if r.access in ("r", "rw") else 0 for i, r in enumerate(ENGINE_REGISTERS)]
        link = {"LINK_SESSION": self.session, "LINK_NEXT_ID": self.expected, "REGISTER_MAP": REGISTER_MAP}
        values = [REGISTER_MAP, *engine, *(link.get(r.name, 0) for r in LINK_REGISTERS)]
        return struct.pack(f">{len(values)}I", *values)

    # -- pushes -------------------------------------------------------------------------------

    def push(self, events: list[int], packets: list[F.ControlPacket] = ()) -> None:
        self.pushes.append((events, list(packets)))

    def _acked(self, ack: int) -> None:
        if self.push_sent is not None and ack == self.push_number:
            self.push_sent, self.push_acked = None, ack

    def _push_now(self) -> list[bytes]:
        if self.push_sent is None and self.pushes and self.owner is not None:
            self.push_number = (self.push_number + 1) % (1 << 16)
            events, packets = self.pushes.popleft()
            self.push_sent = F.encode(F.Header(F.Type.EVENTS, id=self.push_number, session=self.session),
                                      F.encode_events(events, packets))
            return [self.push_sent]
        return []

    def push_timer(self) -> list[bytes]:
        """The push timeout passed: the unacknowledged push again, or a new one."""
        return [self.push_sent] if self.push_sent is not None else self._push_now()


class LossyLink:
    """Datagrams between a client and the model through a seeded lossy path, in virtual time."""

    def __init__(self, board: BoardModel, seed: int, loss: float = 0.0, duplicate: float = 0.0,
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
                    for answer in self.board.receive(datagram, source, self.now):
                        self._send("host", answer)
                else:
                    client.receive(datagram, self.now)
            if self.now >= next_push:
                next_push += push_every
                for answer in self.board.push_timer():
                    self._send("host", answer)
            client.timeout(self.now)
            self.now += 0.0001


class ServedBoard:
    """The model on a UDP socket on loopback, for programs that reach a board by address.
    With ``clock_hz``, its CYCLES register counts that clock in real time, as a board's does."""

    def __init__(self, model: BoardModel | None = None, clock_hz: int = 0) -> None:
        self.model, self.clock_hz = model or BoardModel(), clock_hz
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.05)
        self.port = self.socket.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stopped.is_set():
            try:
                datagram, source = self.socket.recvfrom(65536)
            except TimeoutError:
                continue
            now = time.monotonic()
            if self.clock_hz:
                self.model.registers[ADDRESS["CYCLES"]] = int(now * self.clock_hz) & 0xFFFF_FFFF
            for reply in self.model.receive(datagram, source, now):
                self.socket.sendto(reply, source)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.socket.close()
