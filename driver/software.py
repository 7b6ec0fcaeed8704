"""The software data path: the data-path core on a real socket, with two threads.

A receive thread writes DATA payloads straight into their buffers; a transmit thread
paces bursts with sleep-then-spin (sleep alone wakes 40-100 us late here). The engine
runs on the caller's thread and sees only buffer-level events.
"""

from __future__ import annotations

import threading
import time

from netblt.host import events as ev
from netblt.host.packets import Packet
from netblt.host.params import Params

from .core import DataPathCore
from .transport import Transport

BATCH = 64
"""Packets the transmit thread takes from the pacer at a time."""
SPIN = 0.0002
"""Sleep until this close to a deadline, then spin."""
NOBODY_THERE = "nothing is listening there (ICMP port unreachable)"
QUIET = 0.05
"""Receive-loop wake-up period when nothing arrives."""


def wait_until(deadline: float) -> None:
    while (left := deadline - time.monotonic()) > 0:
        if left > SPIN:
            time.sleep(left - SPIN)


class SoftwareDataPath(DataPathCore):
    def __init__(self, transport: Transport, foreign_port: int = 0) -> None:
        super().__init__(transport.local_port, foreign_port)
        self.transport = transport
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._events_ready = threading.Condition(threading.Lock())
        self._running = True
        self._threads = [threading.Thread(target=self._timed, args=(name, loop), name=f"netblt-{name}",
                                          daemon=True)
                         for name, loop in (("receive", self._receive), ("transmit", self._transmit))]
        self.unreachable: str | None = None
        self.thread_cpu: dict[str, float] = {}
        """CPU seconds each data-path thread used, filled in as it ends."""
        for thread in self._threads:
            thread.start()

    # -- engine side (caller's thread) ------------------------------------------------------

    def configure(self, params: Params) -> None:
        with self._lock:
            super().configure(params)
            self.transport.lock()

    def transmit(self, packet: Packet) -> None:
        self._send([self.encode(packet)])

    def send_buffer(self, number: int, data, last: bool) -> None:
        with self._work:
            super().send_buffer(number, data, last)
            self._work.notify()

    def resend(self, number: int, packets: tuple[int, ...]) -> None:
        with self._work:
            super().resend(number, packets)
            self._work.notify()

    def set_rate(self, burst_size: int, burst_interval_ms: int) -> None:
        with self._lock:
            super().set_rate(burst_size, burst_interval_ms)

    def wait_events(self, timeout: float) -> list[ev.Event]:
        """Events from the data path, waiting up to ``timeout`` seconds for the first."""
        with self._events_ready:
            if not self.events and timeout > 0:
                self._events_ready.wait(timeout)
        with self._lock:
            if self.unreachable:
                self.events.append(ev.PeerUnreachable(self.unreachable))
                self.unreachable = None
            return self.take_events()

    def flush(self) -> list[ev.Event]:
        with self._lock:
            self.flush_report()
            return self.take_events()

    def close(self) -> None:
        self._running = False
        with self._work:
            self._work.notify()
        for thread in self._threads:
            thread.join(timeout=1)
        self.transport.close()

    # -- threads ------------------------------------------------------------------------------

    def _send(self, parts: list) -> None:
        self._send_many([parts])

    def _send_many(self, datagrams: list[list]) -> None:
        try:
            self.transport.send_many(datagrams)
        except ConnectionRefusedError:
            self._unreachable(NOBODY_THERE)
        except OSError as exc:
            self._unreachable(exc.strerror or str(exc))

    def _unreachable(self, detail: str) -> None:
        with self._lock:
            self.unreachable = detail
        self._notify_events()

    def _notify_events(self) -> None:
        with self._events_ready:
            self._events_ready.notify()

    def _timed(self, name: str, loop) -> None:
        try:
            loop()
        finally:
            self.thread_cpu[name] = time.thread_time()

    def _receive(self) -> None:
        buf = bytearray(1 << 16)
        while self._running:
            try:
                datagrams = self.transport.receive(buf)
            except ConnectionRefusedError:
                self._unreachable(NOBODY_THERE)
                continue
            except OSError:
                if self._running:
                    self._unreachable("the socket failed")
                return
            if not datagrams:
                continue
            with self._lock:
                now = time.monotonic()
                for datagram in datagrams:
                    self.receive(datagram, now)
                ready = bool(self.events)
            if ready:
                self._notify_events()

    def _transmit(self) -> None:
        while self._running:
            with self._work:
                now = time.monotonic()
                batch = []
                while len(batch) < BATCH and (item := self.next_packet(now)) is not None:
                    header, payload, padding = item
                    batch.append([header, payload, padding] if padding else [header, payload])
                if not batch:
                    pending, next_burst = bool(self.tx), self.pacer.next_burst
                    if self.events:
                        self._notify_events()
                    if not pending:
                        self._work.wait(QUIET)
                        continue
            if not batch:
                wait_until(next_burst)
                continue
            self._send_many(batch)
