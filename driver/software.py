"""The software data path: the data-path core on a real socket, with two threads.

A receive thread writes DATA payloads straight into their buffers; a transmit thread
paces bursts with sleep-then-spin (sleep alone wakes 40-100 us late here). The protocol
core runs on the caller's thread and sees only buffer-level events. A receiver that serves
one transfer after another keeps its socket and threads and :meth:`reset` s the rest.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable

from ..formats.born import PatternBuffer
from ..protocol import events as ev
from ..protocol.endpoint import DataPathError
from ..protocol.packets import Packet
from ..protocol.params import Params
from .core import DataPathCore
from .framing import HEADER_SIZE
from .transport import (GSO_MAX_BYTES, GSO_MAX_SEGMENTS, MTU, TOO_LARGE, Address, Transport, overhead, show,
                        socket_address)

SPIN = 0.0002
"""Sleep until this close to a deadline, then spin."""
QUIET = 0.05
"""Receive-loop wake-up period when nothing arrives."""


def wait_until(deadline: float) -> None:
    while (left := deadline - time.monotonic()) > 0:
        if left > SPIN:
            time.sleep(left - SPIN)


class SoftwareDataPath(DataPathCore):
    """``peer`` is where an active end opens to (its port also names the peer's NETBLT port
    until RESPONSE says otherwise); a passive end learns its peer from the protocol core."""

    name = "software"

    def __init__(self, transport: Transport, peer: Address | None = None) -> None:
        super().__init__(transport.local_port, peer[1] if peer else 0, transport.address(peer) if peer else None)
        self.transport = transport
        self.peer_address = transport.address(peer) if peer else None
        """The peer, as the socket sends to it."""
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._events_ready = threading.Condition(threading.Lock())
        self._running = True
        self._threads = [threading.Thread(target=self._timed, args=(name, loop), name=f"netblt-{name}",
                                          daemon=True)
                         for name, loop in (("receive", self._receive), ("transmit", self._transmit))]
        self.unreachable: str | None = None
        self.too_large: str | None = None
        """Why DATA cannot reach the peer though control packets do, once the path said so."""
        self.errors_elsewhere = 0
        """ICMP errors about addresses other than the peer's: counted, never acted on."""
        self._clocks: dict[str, int] = {}
        self._cpu_ended: dict[str, float] = {}
        self.cpu_at_configure = 0.0
        """Thread CPU when the connection opened: a report covers the connection only."""
        for thread in self._threads:
            thread.start()

    # -- the protocol core's side (caller's thread) -----------------------------------------

    def reset(self) -> None:
        """Forget the finished connection; keep the socket, threads and unread events
        (an OPEN for the next connection may be among them), and the ports of OPENs heard."""
        with self._lock:
            events, dropped, control = self.events, self.dropped, self.control
            DataPathCore.__init__(self, self.transport.local_port)
            self.events, self.dropped, self.control = events, dropped, control.fresh()
            self.unreachable = self.too_large = None

    def arrived(self, datagram: bytes, source: Address) -> None:
        """A datagram for this data path that another socket took: a station's listener
        hands each sender's OPEN to the process that serves it (host/station.py)."""
        with self._lock:
            self.receive(memoryview(datagram), time.monotonic(), self.transport.address(source))
        self._notify_events()

    def configure(self, params: Params, peer: ev.Address, transfer_size: int | None = None) -> None:
        with self._lock:
            super().configure(params, peer)
            self.peer_address = socket_address(peer)
        self.cpu_at_configure = self.thread_cpu()

    def transmit(self, packet: Packet, to: ev.Address) -> None:
        try:
            self.transport.send([self.encode(packet, to)], socket_address(to))
        except OSError:
            self._icmp_errors()

    def send_buffer(self, number: int, data: bytes | bytearray | memoryview | PatternBuffer, last: bool) -> None:
        with self._work:
            super().send_buffer(number, data, last)
            self._work.notify()

    def resend(self, number: int, packets: tuple[int, ...]) -> None:
        with self._work:
            super().resend(number, packets)
            self._work.notify()

    def release(self, number: int) -> None:
        with self._lock:  # the transmit thread may be packing from it: its memory holds the next buffer
            super().release(number)

    def set_rate(self, burst_size: int, burst_interval_ms: int) -> None:
        with self._lock:
            super().set_rate(burst_size, burst_interval_ms)

    def wait_events(self, timeout: float) -> list[ev.Event]:
        """Events from the data path, waiting up to ``timeout`` seconds for the first."""
        with self._events_ready:
            if not self.events and timeout > 0:
                self._events_ready.wait(timeout)
        with self._lock:
            if self.too_large:
                raise DataPathError(self.too_large, tell_peer=True)
            if self.unreachable:
                self.events.append(ev.PeerUnreachable(self.unreachable))
                self.unreachable = None
            return self.take_events()

    def flush(self) -> list[ev.Event]:
        with self._lock:
            self.flush_report()
            return self.take_events()

    @property
    def local_port(self) -> int:
        return self.transport.local_port

    @property
    def address(self) -> str:
        """The socket's address: the one it was bound to, or every address (0.0.0.0, ::)."""
        return str(self.transport.sock.getsockname()[0])

    def drain_lacks(self, checked: bool) -> str | None:
        return "board"  # received buffers are drained only where a board receives them

    def start_stamps(self, bits_per_second: float) -> None:
        raise DataPathError("the software data path has no stamp source: it needs a board (--board)")

    def counters(self) -> dict[str, int]:
        return {}  # no hardware to count anything

    def interrupt(self) -> None:
        """A signal came: nothing here waits on anything but its own threads."""

    def thread_cpu(self) -> float:
        """CPU seconds the receive and transmit threads have used so far."""
        return sum(self._cpu_ended[name] if name in self._cpu_ended else time.clock_gettime(clock)
                   for name, clock in self._clocks.items())

    def close(self) -> None:
        """Stop the threads; the caller closes the transport."""
        self._running = False
        self.transport.wake()
        with self._work:
            self._work.notify()
        for thread in self._threads:
            thread.join(timeout=1)

    # -- threads ------------------------------------------------------------------------------

    def _icmp_errors(self) -> None:
        """An ICMP error is pending: report it if it is about the peer, else count it."""
        for about, detail in self.transport.errors():
            if about is not None and about != self.peer:
                self.errors_elsewhere += 1
            elif detail == TOO_LARGE:
                self._too_large()
            else:
                with self._lock:
                    self.unreachable = detail
                self._notify_events()

    def _too_large(self) -> None:
        """DATA does not fit the path (a tunnel, a VPN, PPPoE), here or at a router that said
        so: nothing of it would ever arrive, while control packets, smaller, still do."""
        peer = self.peer_address
        if peer is None:
            return  # nothing of a connection's was sent yet
        packet = self.params.packet_size if self.params else 0
        headers = overhead(peer[0], self.transport.kind)
        mtu = self.transport.path_mtu
        fit = (f"its MTU is {mtu}; give a --packet-size of {mtu - headers} or less" if mtu else
               f"its MTU is under {packet + headers}; give a --packet-size {headers} bytes under it "
               f"({MTU - headers} for {MTU})")
        self.too_large = f"DATA packets of {packet} bytes do not fit the path to {show(peer)}: {fit}"
        self._notify_events()

    def _notify_events(self) -> None:
        with self._events_ready:
            self._events_ready.notify()

    def _timed(self, name: str, loop: Callable[[], None]) -> None:
        self._clocks[name] = time.pthread_getcpuclockid(threading.get_ident())
        try:
            loop()
        finally:
            self._cpu_ended[name] = time.thread_time()

    def _receive(self) -> None:
        buf = bytearray(1 << 16)
        while self._running:
            try:
                view, segment, source = self.transport.receive(buf)
            except OSError:
                if not self._running:
                    return
                self._icmp_errors()
                continue
            if source is None:
                continue
            with self._lock:
                self.receive(view, self.transport.arrival or time.monotonic(), source, segment)
                ready = bool(self.events)
            if ready:
                self._notify_events()

    def _transmit(self) -> None:
        out = bytearray(GSO_MAX_BYTES)
        while self._running:
            with self._work:
                packed = None
                if self.params is not None:
                    largest = HEADER_SIZE + self.params.packet_size + 3
                    if len(out) < largest:
                        out = bytearray(largest)
                    packed = self.next_datagrams(time.monotonic(), out,
                                                 min(GSO_MAX_SEGMENTS, len(out) // largest))
                if packed is None:
                    pending, next_burst = bool(self.tx), self.pacer.next_burst
                    if self.events:
                        self._notify_events()
                    if not pending:
                        self._work.wait(QUIET)
                        continue
            if packed is None:
                wait_until(next_burst)
                continue
            size, segment = packed
            try:
                assert self.peer_address is not None  # configured: DATA is packed only then
                self.transport.send_segments(memoryview(out)[:size], segment, self.peer_address)
            except OSError as exc:
                self._icmp_errors()  # first: "fragmentation needed" names the MTU that fits
                if exc.errno == errno.EMSGSIZE:
                    self._too_large()
