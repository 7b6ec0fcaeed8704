"""The board's side of the host link as a functional model: docs/host-link.md's rules.

Sessions, owners and take-over, exactly-once execution with the replay window, STATUS
snapshots, pushed EVENTS with their acknowledgements, and the counters, as
gateware/link_executor.py has them, in front of an :class:`~.engine_model.EngineModel`. No
I/O: datagrams in and replies out, each with the host's time.
"""

from __future__ import annotations

import ipaddress
import struct

from ...formats import host_link as F
from ...formats.boards import GATEWAY, NETMASK
from ...formats.registers import ADDRESS, ENGINE_REGISTERS, LINK_REGISTERS, REGISTER_MAP
from .engine_model import EngineModel

Address = tuple[str, int]
DEFAULT_TAKEOVER_MS = 10_000


class HostLink:
    def __init__(self, engine: EngineModel) -> None:
        self.engine = engine
        self.session = 0
        self.owner: Address = ("0.0.0.0", 0)
        self.owner_heard = 0.0
        self.expected = 1
        self.stored: dict[int, list[bytes]] = {}
        """Replies to the last WINDOW executed requests, by ID (a DOWNLOAD's may be several)."""
        self.push_number = 0
        self.push_sent: bytes | None = None
        self.push_sent_at = 0.0
        self.executed: list[tuple[int, int]] = []
        """(request ID, type) of every execution, for tests."""
        self.counts = {r.name: 0 for r in LINK_REGISTERS if r.name.startswith("LINK_") and r.width == 32
                       and r.name not in ("LINK_SESSION", "LINK_OWNER_ADDRESS", "LINK_OWNER_SILENT")}
        self.events_since: float | None = None
        """When the events waiting began to wait (None: none wait)."""
        self.settings = {"PUSH_TIMEOUT": engine.geometry.clock_hz // 1000, "PUSH_HOLD": 0,
                         "TAKEOVER_AFTER": DEFAULT_TAKEOVER_MS,
                         "PUSH_LIMIT": F.push_limit(1500), "NETMASK": _ipv4(NETMASK), "GATEWAY": _ipv4(GATEWAY)}

    def reset(self) -> None:
        """Power cycled: every session and stored reply is gone."""
        self.session, self.owner, self.expected, self.stored = 0, ("0.0.0.0", 0), 1, {}
        self.push_sent, self.push_number, self.events_since = None, 0, None

    # -- datagrams ---------------------------------------------------------------------------------

    def receive(self, datagram: bytes, source: Address, now: float) -> list[bytes]:
        """The replies to one datagram from ``source`` (pushes, which go to the owner, are
        :meth:`pushes`)."""
        try:
            header, body = F.decode(datagram)
        except F.FormatError:
            self.counts["LINK_DROPPED"] += 1
            return []
        if header.type == F.Type.STATUS:
            return [self._reply(header, body=self._snapshot(now))]
        if header.type == F.Type.OPEN:
            return [self._open(header, source, now)]
        if header.session != self.session or not self.session:
            self.counts["LINK_STALE"] += 1
            return [self._reply(header, F.Status.NO_SESSION)]
        if source != self.owner:
            self.counts["LINK_REFUSED"] += 1
            return [self._reply(header, F.Status.NOT_OWNER)]
        self.owner_heard = now
        if self.push_sent is not None and header.ack == self.push_number:
            self.push_sent = None
        if header.type == F.Type.ACK:
            return []
        if header.type == F.Type.RESEND or header.id != self.expected:
            return self._replay(header)
        answer = self._execute(header, body, now)
        if answer is None:
            self.counts["LINK_DROPPED"] += 1
            return [self._reply(header, F.Status.MALFORMED)]
        self.executed.append((header.id, header.type))
        self.counts["LINK_EXECUTED"] += 1
        self.expected = (self.expected + 1) % (1 << 16)
        self.stored[header.id] = replies = [self._reply(header, body=part, value=value) for value, part in answer]
        self.stored.pop((header.id - F.WINDOW) % (1 << 16), None)
        return [] if _quiet(header) else replies

    def pushes(self, now: float) -> list[bytes]:
        """An unacknowledged push again once PUSH_TIMEOUT has passed; else a new one, when
        events or control packets wait: the events, then the control packets while they fit
        (formats/host_link.py ``push_room``), the first whatever its size."""
        if not self.session:
            return []
        if self.engine.events and self.events_since is None:
            self.events_since = now
        if self.push_sent is not None:
            timeout = self.settings["PUSH_TIMEOUT"] / self.engine.geometry.clock_hz
            if now - self.push_sent_at <= timeout:
                return []
            self.counts["LINK_PUSH_RETRIES"] += 1
        elif self.engine.control_in or self._events_due(now):
            self.push_number = (self.push_number + 1) % (1 << 16)
            room, event_room = F.push_room(self.settings["PUSH_LIMIT"])
            events = self.engine.take_events(event_room)
            if not self.engine.events:
                self.events_since = None
            packets, words = [], F.HEADER.end // 4 + len(events)
            waiting = self.engine.control_in
            while waiting and (not packets or words + F.record_words(len(waiting[0].packet)) <= room):
                packets.append(waiting.popleft())
                words += F.record_words(len(packets[-1].packet))
            self.push_sent = F.encode(F.Header(F.Type.EVENTS, id=self.push_number, session=self.session,
                                               ack=self.expected),
                                      F.encode_events(events, packets))
        else:
            return []
        self.push_sent_at = now
        self.counts["LINK_PUSHES"] += 1
        return [self.push_sent]

    def _events_due(self, now: float) -> bool:
        """Events wait PUSH_HOLD for a control packet to go with them (a sender's SENT for
        the peer's OK: one wake of the host for both)."""
        return self.events_since is not None and now >= self.hold_ends()

    def hold_ends(self) -> float:
        """When the events waiting may go alone (the serve loop looks again then)."""
        assert self.events_since is not None
        return self.events_since + self.settings["PUSH_HOLD"] / self.engine.geometry.clock_hz

    def _reply(self, header: F.Header, status: F.Status = F.Status.OK, body: bytes = b"",
               value: int | None = None) -> bytes:
        return F.encode(F.Header(header.type | F.REPLY, id=header.id, session=self.session, ack=self.expected,
                                 status=status, value=header.value if value is None else value), body)

    def _replay(self, header: F.Header) -> list[bytes]:
        stored = self.stored.get(header.id)
        self.counts["LINK_REPLAYED" if stored else "LINK_STALE"] += 1
        return stored or [self._reply(header, F.Status.OUT_OF_WINDOW)]

    def _open(self, header: F.Header, source: Address, now: float) -> bytes:
        silent = self._silent_ms(now)
        taking_over = header.flags & F.FLAG_TAKE_OVER and silent > self.settings["TAKEOVER_AFTER"]
        status = F.Status.OK
        if not self.session or source == self.owner or taking_over:
            if header.session != self.session:
                self.session, self.expected, self.stored = header.session, 1, {}
                self.push_number, self.push_sent = 0, None
            self.owner, self.owner_heard = source, now
            silent = 0
        else:
            self.counts["LINK_REFUSED"] += 1
            status = F.Status.NOT_OWNER
        return self._reply(header, status, struct.pack(">III", _ipv4(self.owner[0]), self.owner[1], silent))

    def _silent_ms(self, now: float) -> int:
        return min(0xFFFF_FFFF, int(1000 * (now - self.owner_heard)))

    # -- requests ---------------------------------------------------------------------------------------

    def _execute(self, header: F.Header, body: memoryview, now: float) -> list[tuple[int, bytes]] | None:
        """The replies of a request that runs, each its ``value`` and body; None for a
        malformed one (nothing runs)."""
        if header.type == F.Type.REGISTERS:
            if not body or len(body) % 8 or len(body) > 8 * F.MAX_OPERATIONS:
                return None
            return [(header.value, F.encode_operations([self._operation(op, now) for op in F.decode_operations(body)]))]
        if header.type == F.Type.UPLOAD:  # whole words only, as the executor counts them (its length >> 2)
            words = body[:len(body) - len(body) % 4]
            return [(header.value, b"")] if self.engine.upload(header.value, words) else None
        parts = F.download_parts(body) if header.type == F.Type.DOWNLOAD else None
        data = self.engine.download(header.value, parts[0]) if parts else None
        if parts is None or data is None:
            return None
        step = 4 * parts[1]
        return [(header.value + at // 4, data[at:at + step]) for at in range(0, len(data), step)] or [(header.value, b"")]

    def _operation(self, op: F.Operation, now: float) -> F.Operation:
        if op.opcode == F.Opcode.WRITE:
            self.write(op.register, op.value, now)
        elif op.opcode == F.Opcode.READ:
            return F.Operation(op.opcode | F.DONE, op.register, self.read(op.register, now))
        else:
            return op
        return F.Operation(op.opcode | F.DONE, op.register, op.value)

    def read(self, address: int, now: float) -> int:
        name = _LINK_NAMES.get(address)
        if name is None:
            return self.engine.read(address, now)
        values = {"LINK_SESSION": self.session, "LINK_OWNER_ADDRESS": _ipv4(self.owner[0]),
                  "LINK_OWNER_PORT": self.owner[1], "LINK_OWNER_SILENT": self._silent_ms(now),
                  "LINK_NEXT_ID": self.expected, "LINK_PUSH_NUMBER": self.push_number, "LINK_WINDOW": F.WINDOW,
                  "REGISTER_MAP": REGISTER_MAP}
        return values.get(name, self.counts.get(name, self.settings.get(name, self.engine.fixed.get(name, 0))))

    def write(self, address: int, value: int, now: float) -> None:
        name = _LINK_NAMES.get(address)
        if name is None:
            self.engine.write(address, value, now)
        elif name in self.settings:
            self.settings[name] = value

    def _snapshot(self, now: float) -> bytes:
        """REGISTER_MAP, the engine registers that do not pop (by address), the link's."""
        engine = [self.engine.read(ADDRESS[r.name], now) if r.access in ("r", "rw") else 0 for r in ENGINE_REGISTERS]
        link = [self.read(ADDRESS[r.name], now) for r in LINK_REGISTERS]
        values = [REGISTER_MAP, *engine, *link]
        return struct.pack(f">{len(values)}I", *values)


_LINK_NAMES = {ADDRESS[r.name]: r.name for r in LINK_REGISTERS}


def _quiet(header: F.Header) -> bool:
    """An UPLOAD or REGISTERS request that asks for no reply when it runs (a replay answers
    all the same)."""
    return header.type in (F.Type.UPLOAD, F.Type.REGISTERS) and bool(header.flags & F.FLAG_QUIET)


def _ipv4(address: str) -> int:
    return int(ipaddress.IPv4Address(address))
