"""A UDP relay between two real endpoints that applies a :class:`Path` in each direction.

The sender talks to ``--listen``; the relay forwards to ``--forward`` from a socket of
its own and carries the replies back to whoever last sent from the listening side.
The kernel here has no netem qdisc, so the WAN is emulated in user space.
"""

from __future__ import annotations

import itertools
import selectors
import socket
import time
from dataclasses import dataclass

from ...driver.transport import Address, Transport, segment_runs
from .netem import InFlight, Path, PathConfig, precise_selector

Delivery = tuple[Transport, bytes, Address]

BATCH = 64
"""Reads from one socket (each up to 64 datagrams the kernel coalesced) before looking at
the clock again."""


@dataclass
class RelayStats:
    forward: Path
    backward: Path


class Relay:
    """Datagrams are read and sent in batches (segmentation offload, as the software data
    path does); each one still meets the path model on its own."""

    def __init__(self, listen: Address, forward: Address, config: PathConfig,
                 backward: PathConfig | None = None, seed: int = 1) -> None:
        self.front = Transport("udp", listen)
        self.back = Transport("udp", ("", 0), family=_family(forward[0]))
        for transport in (self.front, self.back):
            transport.sock.setblocking(False)
        self.address = self.front.sock.getsockname()[:2]
        self.target = forward
        self.client: Address | None = None
        self.stats = RelayStats(Path(config, seed), Path(backward or config, seed + 1))
        self.in_flight: InFlight[Delivery] = InFlight((self.stats.forward, self.stats.backward))
        self._buf = bytearray(1 << 16)

    def run(self, duration: float = 0.0) -> None:
        """Relay for ``duration`` seconds (0: until interrupted)."""
        selector = precise_selector()
        selector.register(self.front.sock, selectors.EVENT_READ, self.front)
        selector.register(self.back.sock, selectors.EVENT_READ, self.back)
        end = time.monotonic() + duration if duration else float("inf")
        try:
            while time.monotonic() < end:
                now = time.monotonic()
                _send(self.in_flight.due(now))
                for key, _ in selector.select(self.in_flight.wait(now)):
                    self._read(key.data, time.monotonic())
        finally:
            selector.close()
            self.front.close()
            self.back.close()

    def _read(self, transport: Transport, now: float) -> None:
        due: list[Delivery] = []
        for _ in range(BATCH):
            try:
                view, segment, source = transport.receive(self._buf)
            except OSError:
                transport.errors()  # the far end went away: what it was sent is lost, as on a real path
                continue
            if source is None:
                break
            if transport is self.front:
                self.client = source
                path, out, dest = self.stats.forward, self.back, self.target
            elif self.client is not None:
                path, out, dest = self.stats.backward, self.front, self.client
            else:
                continue
            segment = segment or len(view)
            for at in range(0, len(view), segment) if segment else (0,):
                for when, copy in path.send(bytes(view[at:at + segment]), now):
                    if when <= now and not self.in_flight:
                        due.append((out, copy, dest))
                    else:
                        self.in_flight.add(when, (out, copy, dest))
        _send(due)
        _send(self.in_flight.due(time.monotonic()))


def _send(due: list[Delivery]) -> None:
    """Send in order, runs of equal-sized datagrams to one place in one system call each."""
    for (out, dest), group in itertools.groupby(due, key=lambda d: (d[0], d[2])):
        datagrams = [datagram for _, datagram, _ in group]
        for start, end in segment_runs([len(d) for d in datagrams]):
            try:
                out.send_segments(memoryview(b"".join(datagrams[start:end])), len(datagrams[start]) or 1, dest)
            except OSError:
                out.errors()  # the far end went away: the datagrams are lost, as on a real path


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
