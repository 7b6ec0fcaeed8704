"""The data-path interface, and its per-packet work with no I/O and no clock.

:class:`DataPathCore` is what the engine drives (buffer-level calls in, buffer-level
events out). The software data path wraps it with sockets and threads; the virtual-time
simulation wraps it with a simulated network. The board driver implements the same
calls against the gateware.
"""

from __future__ import annotations

from collections import Counter

from netblt.host import events as ev
from netblt.host.packets import Packet
from netblt.host.params import Params

from .control_codec import ControlCodec
from .framing import HEADER_SIZE, FrameError, build_header, is_data, parse_header
from .pacer import BurstPacer
from .reassembly import ReceiveBuffers
from .txqueue import TransmitQueue

REPORT_INTERVAL = 0.02
"""Seconds between :class:`~netblt.host.events.Arrivals` reports while data flows."""


class DataPathCore:
    """``peer`` is the address an active end opens to; a passive end learns it from the
    engine at :meth:`configure`. Only the peer's DATA is placed."""

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
        self._header = bytearray(HEADER_SIZE)
        self._busy = False

    host_link_bytes = 0
    """Bytes moved over a board's host link: none here."""

    def fit(self, params: Params, *, sending: bool) -> Params:
        return params  # this host holds whatever the engine negotiates

    def unusable(self, params: Params, transfer_size: int | None, sending: bool) -> str | None:
        return None

    def configure(self, params: Params, peer: ev.Address, transfer_size: int | None = None) -> None:
        """The connection is established with ``peer``: size the queues for the negotiated values."""
        self.params = params
        self.control.configure(peer)
        self.tx = TransmitQueue(params.packet_size)
        self.rx = ReceiveBuffers(params.packet_size, params.buffer_size)

    # -- calls from the engine (one per action) ---------------------------------------------

    def send_buffer(self, number: int, data: bytes | bytearray | memoryview, last: bool) -> None:
        self.tx.load(number, data, last)
        self._busy = True

    def resend(self, number: int, packets: tuple[int, ...]) -> None:
        if self.tx.resend(number, packets):
            self._busy = True
        elif not self.tx:
            self._idle()

    def release(self, number: int) -> None:
        self.tx.release(number)

    def set_rate(self, burst_size: int, burst_interval_ms: int) -> None:
        self.pacer.set_rate(burst_size, burst_interval_ms / 1000)

    def stamp_high_ack(self, high_ack: int) -> None:
        self.high_ack = high_ack

    def post_receive(self, number: int, capacity: int) -> None:
        self.rx.post(number, capacity)

    def drop_receive(self, number: int) -> None:
        self.rx.drop(number)

    def query_missing(self, number: int) -> None:
        self.events.append(ev.MissingPackets(number, self.rx.missing(number)))

    def take(self, number: int) -> memoryview:
        return self.rx.take(number)

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

    def next_packet(self, now: float) -> tuple[bytes, memoryview, bytes] | None:
        """Header, payload and padding of the next DATA packet the pacer allows now."""
        if self.tx is None or self.pacer.allowance(now) == 0:
            return None
        item = self.tx.pop()
        if item is None:
            self._idle()
            return None
        self.pacer.sent()
        padding = build_header(
            self._header, local_port=self.control.local_port, foreign_port=self.control.foreign_port,
            buffer=item.buffer, packet=item.packet, high_ack=self.high_ack, ldata=item.ldata,
            last_buffer=item.last_buffer, payload=item.payload,
            data_checksum=self.params.data_checksum)
        return bytes(self._header), item.payload, padding

    def _idle(self) -> None:
        if self._busy:
            self._busy = False
            self.events.append(ev.TransmitIdle())

    def receive(self, datagram: memoryview, now: float, source: ev.Address) -> None:
        """One datagram: the peer's DATA is placed, anything else goes to the engine."""
        if is_data(datagram):
            if self.rx is None:
                self.dropped["data before setup"] += 1
                return
            if source != self.peer:
                self.dropped["not from the peer"] += 1
                return
            try:
                header = parse_header(datagram, self.params.data_checksum)
            except FrameError as exc:
                self.dropped[str(exc)] += 1
                return
            if header.foreign_port != self.control.local_port or header.local_port != self.control.foreign_port:
                self.dropped["ports"] += 1
                return
            self.events.extend(self.rx.accept(header, datagram, now))
            if report := self.rx.report(REPORT_INTERVAL):
                self.events.append(report)
            return
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
