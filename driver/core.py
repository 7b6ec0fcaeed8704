"""The data-path interface, and its per-packet work with no I/O and no clock.

:class:`DataPathCore` is what the protocol core drives (buffer-level calls in, buffer-level
events out). The software data path wraps it with sockets and threads; the virtual-time
simulation wraps it with a simulated network. The board driver implements the same
calls against the gateware.
"""

from __future__ import annotations

from collections import Counter

from ..formats.born import BornBuffer, PatternBuffer
from ..protocol import events as ev
from ..protocol.packets import Packet
from ..protocol.params import Params
from .burst_pacer import BurstPacer
from .control_codec import ControlCodec
from .framing import is_data, pack
from .pattern import pattern
from .receive_buffers import ReceiveBuffers
from .txqueue import TransmitQueue

REPORT_INTERVAL = 0.02
"""Seconds between :class:`~netblt.protocol.events.Arrivals` reports while data flows."""


class DataPathCore:
    """``peer`` is the address an active end opens to; a passive end learns it from the
    protocol core at :meth:`configure`. Only the peer's DATA is placed."""

    def __init__(self, local_port: int = 0, foreign_port: int = 0, peer: ev.Address = None) -> None:
        self.control = ControlCodec(local_port, foreign_port, peer)
        self.params: Params | None = None
        self.tx: TransmitQueue | None = None
        self.rx: ReceiveBuffers | None = None
        self.pacer = BurstPacer(1, 0.001)
        self.high_ack = 0
        self.events: list[ev.Event] = []
        self.dropped: Counter[str] = Counter()
        """Bad packets counted and dropped, by reason."""
        self._busy = False

    host_link_bytes = host_link_requests = host_link_slow_path = 0
    """What crosses a board's host link: nothing here."""
    link_mtu: int | None = None
    """No host link."""
    def makes(self, born: type[BornBuffer]) -> bool:
        """It makes the pattern (in C); it has no source port."""
        return born is PatternBuffer

    def fit(self, params: Params, *, sending: bool, defaults: frozenset[str] = frozenset()) -> Params:
        return params  # this host holds whatever the protocol core negotiates

    def unusable(self, params: Params, transfer_size: int | None, sending: bool) -> str | None:
        return None

    def configure(self, params: Params, peer: ev.Address, transfer_size: int | None = None) -> None:
        """The connection is established with ``peer``: size the queues for the negotiated values."""
        self.params = params
        self.control.configure(peer)
        self.tx = TransmitQueue(params.packet_size)
        self.rx = ReceiveBuffers(params.packet_size, params.buffer_size, self.control.local_port,
                                 self.control.foreign_port, params.data_checksum)

    @property
    def _queue(self) -> TransmitQueue:
        assert self.tx is not None, "configure() first: the protocol core sends nothing before"
        return self.tx

    @property
    def _buffers(self) -> ReceiveBuffers:
        assert self.rx is not None, "configure() first: the protocol core posts nothing before"
        return self.rx

    # -- calls from the protocol core (one per action) --------------------------------------

    def send_buffer(self, number: int, data: bytes | bytearray | memoryview | PatternBuffer, last: bool) -> None:
        """``data`` may be the pattern (:meth:`makes` says which born buffers it makes)."""
        if isinstance(data, PatternBuffer):  # this host is where board-born data is made
            data = pattern(data.key, data.length)
        self._queue.load(number, data, last)
        self._busy = True

    def load_ahead(self, number: int, data: bytes | memoryview) -> None:
        """Nothing to do: a buffer here is loaded by reference when it is sent."""

    def resend(self, number: int, packets: tuple[int, ...]) -> None:
        if self._queue.resend(number, packets):
            self._busy = True
        elif not self.tx:
            self._idle()

    def release(self, number: int) -> None:
        self._queue.release(number)

    def set_rate(self, burst_size: int, burst_interval_ms: int) -> None:
        self.pacer.set_rate(burst_size, burst_interval_ms / 1000)

    def stamp_high_ack(self, high_ack: int) -> None:
        self.high_ack = high_ack

    def post_receive(self, number: int, capacity: int) -> None:
        self._buffers.post(number, capacity)

    def drop_receive(self, number: int) -> None:
        self._buffers.drop(number)

    def query_missing(self, number: int) -> None:
        self._buffers.restart_gap()
        self.events.append(ev.MissingPackets(number, self._buffers.missing(number)))

    def take(self, number: int) -> memoryview:
        return self._buffers.take(number)

    @property
    def duplicates(self) -> int:
        """Harmless second copies of DATA."""
        return self.rx.duplicates if self.rx is not None else 0

    @property
    def resent(self) -> int:
        """Packets sent again on request."""
        return self.tx.resent if self.tx is not None else 0

    @property
    def peer(self) -> ev.Address:
        return self.control.peer

    def encode(self, packet: Packet, to: ev.Address) -> bytes:
        """A non-data packet for ``to``, ready to send at once (control traffic is not paced)."""
        return self.control.encode(packet, to)

    # -- per packet -------------------------------------------------------------------------

    def next_datagrams(self, now: float, out: bytearray, limit: int) -> tuple[int, int] | None:
        """Up to ``limit`` DATA packets the pacer allows now, consecutive in one buffer,
        packed back to back into ``out``: returns the bytes written and the size of every
        packet but the last (a shorter LDATA)."""
        if self.tx is None or self.params is None or (allowed := self.pacer.allowance(now)) == 0:
            return None
        run = self.tx.pop_run(min(limit, allowed))
        if run is None:
            self._idle()
            return None
        self.pacer.sent(run.n)
        return pack(out, run.data, self.params.packet_size, run.first, run.n, run.buffer, self.high_ack,
                    run.last_buffer, self.control.local_port, self.control.foreign_port,
                    self.params.data_checksum)

    def _idle(self) -> None:
        if self._busy:
            self._busy = False
            self.events.append(ev.TransmitIdle())

    def receive(self, view: memoryview, now: float, source: ev.Address, segment: int = 0) -> None:
        """Datagrams from ``source``, each ``segment`` bytes (the last may be shorter; 0: one
        datagram): the peer's DATA is placed, anything else goes to the protocol core."""
        segment = segment or len(view)
        if self.rx is not None and source == self.peer and segment:
            events, others = self.rx.accept(view, segment, now)
            self.events += events
            if report := self.rx.report(REPORT_INTERVAL):
                self.events.append(report)
            for start, end in others:
                self._control(view[start:end], source)
            return
        for at in range(0, len(view), segment) if segment else (0,):
            datagram = view[at:at + segment] if segment else view
            if is_data(datagram):
                self.dropped["data before setup" if self.rx is None else "not from the peer"] += 1
            else:
                self._control(datagram, source)

    def _control(self, datagram: memoryview, source: ev.Address) -> None:
        packet = self.control.decode(datagram, source, self.dropped)
        if packet is not None:
            self.events.append(ev.PacketReceived(packet, source))

    def flush_report(self) -> None:
        """Report activity that a quiet spell would otherwise leave unreported."""
        if self.rx is not None and (report := self.rx.report(0.0)):
            self.events.append(report)

    def drop_counts(self) -> dict[str, int]:
        """Every packet counted and dropped, by reason."""
        counts = self.dropped.copy()
        if self.rx is not None:
            counts.update(self.rx.dropped)
        return dict(counts)

    def take_events(self) -> list[ev.Event]:
        out, self.events = self.events, []
        return out
