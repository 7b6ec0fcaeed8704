"""Connection parameters, their limits, and negotiation (RFC 998 section 4)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..formats.rfc998 import DATA_HEADER_SIZE
from .packets import Setup

MAX_PACKETS_PER_BUFFER = 1 << 16
"""Packet numbers are 16-bit and count from 0 in each buffer (reading A6)."""
MAX_PACKET_SIZE = 0xFFFF - DATA_HEADER_SIZE - 3
"""The largest data area whose aligned packet still fits the 16-bit length field."""


class ParamError(ValueError):
    """Parameters that cannot make a NETBLT connection."""


@dataclass(frozen=True)
class Params:
    buffer_size: int
    """Bytes in every buffer but the last."""
    packet_size: int
    """Data bytes in every DATA packet but a buffer's LDATA (reading A5)."""
    burst_size: int
    burst_interval: int
    """Milliseconds, start of one burst to the start of the next (reading A4)."""
    max_buffers: int
    data_checksum: bool
    death_timer: int
    """Seconds: this end's own death timer (not negotiated)."""
    rate_cap: float = math.inf
    """Bits/s: the most a passive end accepts, whatever the packet size (never on the wire)."""
    auto_rate: bool = False
    """A sender's burst rate is only a cap: it starts lower and takes what the receiver
    offers (protocol/rate.py; never on the wire)."""

    def __post_init__(self) -> None:
        checks = [
            (1 <= self.packet_size <= MAX_PACKET_SIZE,
             f"packet size {self.packet_size} is outside 1..{MAX_PACKET_SIZE}"),
            (1 <= self.buffer_size <= 0xFFFFFFFF, f"buffer size {self.buffer_size} is outside 1..2^32-1"),
            (self.packets_per_buffer <= MAX_PACKETS_PER_BUFFER,
             f"a buffer of {self.buffer_size} bytes needs {self.packets_per_buffer} packets of "
             f"{self.packet_size} bytes; packet numbers allow {MAX_PACKETS_PER_BUFFER}"),
            (1 <= self.burst_size <= 0xFFFF, f"burst size {self.burst_size} is outside 1..65535"),
            (1 <= self.burst_interval <= 0xFFFF,
             f"burst interval {self.burst_interval} ms is outside 1..65535"),
            (1 <= self.max_buffers <= 0xFFFF, f"outstanding buffers {self.max_buffers} is outside 1..65535"),
            (1 <= self.death_timer <= 0xFFFF, f"death timer {self.death_timer} s is outside 1..65535"),
        ]
        for ok, message in checks:
            if not ok:
                raise ParamError(message)

    @property
    def packets_per_buffer(self) -> int:
        return max(1, math.ceil(self.buffer_size / self.packet_size))

    @property
    def rate_bps(self) -> float:
        """The peak data rate the burst parameters allow, in bits per second."""
        return burst_rate_bps(self.burst_size, self.burst_interval, self.packet_size)

    @classmethod
    def from_setup(cls, packet: Setup) -> Params:
        return cls(buffer_size=packet.buffer_size, packet_size=packet.packet_size,
                   burst_size=packet.burst_size, burst_interval=packet.burst_interval,
                   max_buffers=packet.max_buffers, data_checksum=packet.data_checksum,
                   death_timer=packet.death_timer)

    def restrict(self, proposal: Params) -> Params:
        """The passive end's answer: each value at most as generous as either side's.

        The burst is restricted in bytes and time, not in packets: when the packet size
        shrinks, more packets go per burst, so the proposed rate is kept (ours, docs/protocol.md).
        The data checksum is on when either side asks for it (reading A16); the death
        timer stays this end's own.
        """
        packet_size = min(self.packet_size, proposal.packet_size)
        burst_size, burst_interval = proposal.burst_size, proposal.burst_interval
        rate = min(proposal.rate_bps, self.rate_cap)
        if (packet_size, rate) != (proposal.packet_size, proposal.rate_bps) or \
                burst_size > self.burst_size or burst_interval < self.burst_interval:
            burst_size, burst_interval = burst_for_rate(
                rate, packet_size, min_interval=max(self.burst_interval, proposal.burst_interval),
                max_burst=min(self.burst_size, proposal.burst_bytes // packet_size))
        return replace(
            self,
            buffer_size=min(self.buffer_size, proposal.buffer_size, packet_size * MAX_PACKETS_PER_BUFFER),
            packet_size=packet_size, burst_size=burst_size, burst_interval=burst_interval,
            max_buffers=min(self.max_buffers, proposal.max_buffers),
            data_checksum=self.data_checksum or proposal.data_checksum,
            rate_cap=math.inf,
        )

    @property
    def burst_bytes(self) -> int:
        return self.burst_size * self.packet_size

    def widens(self, proposal: Params) -> str | None:
        """Why these (answered) values are less restrictive than ``proposal``, if they are."""
        for name in ("buffer_size", "packet_size", "burst_bytes", "max_buffers"):
            if getattr(self, name) > getattr(proposal, name):
                return f"{name} {getattr(self, name)} exceeds the proposed {getattr(proposal, name)}"
        if self.burst_interval < proposal.burst_interval:
            return f"burst interval {self.burst_interval} ms is shorter than the proposed {proposal.burst_interval}"
        if proposal.data_checksum and not self.data_checksum:
            return "the data checksum was dropped"
        return None


RATE_TOLERANCE = 0.01
"""How far below a requested rate the chosen burst size and interval may fall."""


def burst_rate_bps(burst_size: int, burst_interval: int, packet_size: int) -> float:
    """Bits per second of ``burst_size`` packets every ``burst_interval`` ms."""
    return burst_size * packet_size * 8 * 1000 / burst_interval


def burst_for_rate(rate_bps: float, packet_size: int, *, min_interval: int = 1,
                   max_burst: int = 0xFFFF) -> tuple[int, int]:
    """Burst size and interval (ms) for ``rate_bps``, never above it.

    The shortest interval whose whole number of packets comes within 1% of the rate, so
    pacing stays smooth (1 ms at gigabit rates, longer for slow links); where the 16-bit
    fields allow nothing that close, the closest they allow.
    """
    if not rate_bps > 0:
        raise ParamError(f"rate {rate_bps} must be positive")
    per_ms = rate_bps / 8 / 1000 / packet_size
    if per_ms * 0xFFFF < 1:
        slowest = burst_rate_bps(1, 0xFFFF, packet_size)
        raise ParamError(f"rate {rate_bps:g} b/s is below the slowest {packet_size}-byte packets allow "
                         f"(one per 65.535 s, {slowest:.0f} b/s)")
    max_burst = max(1, min(0xFFFF, max_burst))
    first = min(0xFFFF, max(min_interval, math.ceil(1 / per_ms - 1e-9)))
    best = (1, first)
    for interval in range(first, 0xFFFF + 1):
        burst = min(max_burst, math.floor(per_ms * interval + 1e-9))
        if burst / interval > best[0] / best[1]:
            best = (burst, interval)
        if best[0] / best[1] >= (1 - RATE_TOLERANCE) * per_ms or burst == max_burst:
            break
    return best


@dataclass(frozen=True)
class Timing:
    """Timer values RFC 998 leaves to the implementation (docs/protocol.md, A19-A24)."""

    open_timeout: float = 0.5
    """First OPEN retransmission after this many seconds, doubling each try up to
    ``control_max`` or a quarter of the death timer; an active end gives up when its death
    timer has run since the first."""
    control_initial: float = 0.5
    control_min: float = 0.005
    control_max: float = 30.0
    data_variance: float = 0.02
    """Seconds added to every data-timer estimate, the floor of the adaptive variance."""
    ok_hold: float = 0.005
    """How long an OK may wait for the client to release the buffer, so that OK(n) and
    GO(n+k) travel in one CONTROL packet (RFC 1030)."""
    dally_margin: float = 0.2
    quit_timeout: float = 0.5
