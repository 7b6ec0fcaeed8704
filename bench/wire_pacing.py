"""Burst pacing as it reaches a board's wire, read from a pcap stamped in simulated nanoseconds.

The engine's pacer grants ``burst_size`` packet starts at each boundary of a
free-running interval of ``interval`` clock cycles (gateware/pacer.py). At the wire a
DATA frame whose data was ready starts a fixed pipeline delay after its grant, so on a
grid of the interval; it starts later only when the board's one transmit port was busy
with another frame at that moment, and then as soon as the wire frees. A buffer's first
packet may start anywhere (its SEND came while a grant was unused), and so may the
first after the interval was changed. This module checks exactly that, frame by frame,
and measures it: :func:`sent` reads a transfer's frames from a pcap, :func:`check_transfer`
judges them on each interval the board was given in turn.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, replace
from statistics import median

GAP_BYTES = 12
"""The inter-frame gap after every frame."""


@dataclass(frozen=True)
class Frame:
    start_ns: float
    """When its preamble began on the wire."""
    end_ns: float
    """When its inter-frame gap ended: the wire is free again."""
    data: tuple[int, int] | None = None
    """(buffer, packet) for a DATA packet of the transfer looked at; None for any other frame."""
    restarts: bool = False
    """The first DATA after the interval changed: it may start anywhere."""


def frame_on_wire(end_ns: float, length: int, data: tuple[int, int] | None = None) -> Frame:
    """A frame of ``length`` bytes (FCS not included) whose last byte ended at ``end_ns``."""
    return Frame(end_ns - (8 + length + 4) * 8, end_ns + GAP_BYTES * 8, data)


@dataclass
class Pacing:
    """What a transfer's DATA frames did against the grid."""

    interval: int
    burst_size: int
    on_grid: int = 0
    """Packets that started on their grant's grid point."""
    waited: int = 0
    """Packets that found the wire busy at their grid point and started as it freed."""
    first_of_buffer: int = 0
    """Packets free to start anywhere: a buffer's first, or the first after a change."""
    unjudged: int = 0
    """Packets of a stretch between two changes of rate too short to show its interval
    (no two paced packets of one buffer in a row): nothing to judge them against."""
    worst_error: float = 0.0
    """Cycles, the largest distance from the grid point (or from the wire freeing) of any packet."""
    most_ahead: int = 0
    """The most packets any start was ahead of burst_size per interval boundary passed
    (0: never more than the pacer grants)."""
    faults: list[str] = field(default_factory=list)
    """Each packet that broke the pacing, and how."""


def check(frames: list[Frame], interval: int, burst_size: int, clock_hz: int) -> Pacing:
    """The DATA frames among ``frames`` (every frame the board sent, in any order) against
    a grid of ``interval`` cycles. Its phase is taken from the packets that found the
    wire free; the rate from counting: by any start, no more packets than burst_size
    per grid point passed since the first."""
    cycle = 1e9 / clock_hz
    frames = sorted(frames, key=lambda f: f.start_ns)
    result = Pacing(interval, burst_size)
    data = [f for f in frames if f.data is not None]
    if interval <= 0:
        result.unjudged = len(data)
        return result
    if not data:
        return result
    origin = data[0].start_ns
    free = [f for f, before in zip(frames[1:], frames) if f.data is not None and f.data[1] != 0
            and f.start_ns - before.end_ns >= cycle]
    offsets = [(f.start_ns - origin) / cycle % interval for f in free]
    phase = Counter(round(o) % interval for o in offsets).most_common(1)[0][0] if offsets else 0
    # Starts are stamped in the wire's clock, so they scatter a fraction of a cycle about
    # the grid, and the first packet's own start (the origin) was stamped so too: centre
    # the phase among the starts within a cycle of the commonest, else a packet 0.6 of a
    # cycle early would be taken for one an interval late.
    near = [d for o in offsets if abs(d := (o - phase + interval / 2) % interval - interval / 2) < 1]
    phase += median(near) if near else 0
    """Grid points are ``phase`` + k x ``interval`` cycles from the first packet's start."""

    def grid_point(cycles: float) -> int:
        """The last grid point at or before ``cycles`` (half a cycle early counts as on it)."""
        return math.floor((cycles - phase + 0.5) / interval)

    first = grid_point(0)
    for count, frame in enumerate(data, start=1):
        cycles = (frame.start_ns - origin) / cycle
        point = grid_point(cycles)
        result.most_ahead = max(result.most_ahead, count - burst_size * (point - first + 1))
        if frame.data[1] == 0 or frame.restarts:
            result.first_of_buffer += 1
            continue
        late = cycles - phase - point * interval
        if abs(late) < 1:
            result.on_grid += 1
            result.worst_error = max(result.worst_error, abs(late))
            continue
        freed = _wire_busy_until(frames, origin + (phase + point * interval) * cycle, frame, cycle)
        error = (frame.start_ns - freed) / cycle if freed is not None else math.inf
        if abs(error) < 1:
            result.waited += 1
            result.worst_error = max(result.worst_error, abs(error))
        else:
            result.faults.append(f"buffer {frame.data[0]} packet {frame.data[1]}: {late:+.1f} cycles from its "
                                 "grid point" + ("" if freed is None else f", {error:+.1f} from the wire freeing"))
    if result.most_ahead > 0:
        result.faults.append(f"up to {result.most_ahead} packet(s) ahead of {burst_size} per interval")
    return result


def _wire_busy_until(frames: list[Frame], at_ns: float, frame: Frame, slack_ns: float) -> float | None:
    """If other frames kept the wire busy without a break (``slack_ns`` allowed) from
    ``at_ns`` until ``frame`` started, when the last of them freed it; else None."""
    busy = None
    for other in frames:
        if other is frame or other.start_ns >= frame.start_ns:
            continue
        if other.end_ns <= at_ns:
            continue
        if busy is None:
            if other.start_ns > at_ns + slack_ns:
                return None  # the wire was free at the grid point
            busy = other.end_ns
        elif other.start_ns <= busy + slack_ns:
            busy = max(busy, other.end_ns)
        else:
            return None  # a free stretch before this frame started
    return busy


def split(frames: list[Frame], changes_ns: list[float]) -> list[list[Frame]]:
    """``frames`` cut where the board's interval changed (at each of ``changes_ns``),
    the first DATA frame after each cut free to start anywhere."""
    frames = sorted(frames, key=lambda f: f.start_ns)
    cuts = sorted(changes_ns)
    parts: list[list[Frame]] = [[] for _ in range(len(cuts) + 1)]
    for frame in frames:
        part = parts[sum(1 for at in cuts if at <= frame.start_ns)]
        if frame.data is not None and part is not parts[0] and not any(f.data for f in part):
            frame = replace(frame, restarts=True)
        part.append(frame)
    return [part for part in parts if any(f.data for f in part)]


def interval_of(frames: list[Frame], clock_hz: int) -> int:
    """The interval in cycles the DATA among ``frames`` were paced at: the commonest gap
    between packets of one buffer (packets after a buffer's first find their data ready);
    0 when there is no such gap."""
    cycle = 1e9 / clock_hz
    data = [f for f in sorted(frames, key=lambda f: f.start_ns) if f.data is not None]
    gaps = Counter(round((b.start_ns - a.start_ns) / cycle) for a, b in zip(data, data[1:])
                   if a.data[0] == b.data[0] and a.data[1] and not b.restarts)
    return gaps.most_common(1)[0][0] if gaps else 0


def sent(pcap_frames, board_mac: str, board_port: int, peer_port: int,
         burst: tuple[int, int]) -> tuple[list[Frame], list[float]]:
    """Every frame the board put on its wire while it sent DATA to ``peer_port`` (the
    transfer's DATA marked), and when the rate changed: each NULL-ACK of the board's with
    values other than those before it (``burst``: the set-up's burst size and interval)."""
    from scapy.layers.inet import UDP

    from ..protocol import codec, packets

    ours, changes = [], []
    for frame in pcap_frames:
        if frame.src != board_mac:
            continue
        packet = None
        if UDP in frame and (frame[UDP].sport, frame[UDP].dport) == (board_port, peer_port):
            packet = codec.decode(bytes(frame[UDP].payload)[:frame[UDP].len - 8]).packet
        data = (packet.buffer, packet.packet) if isinstance(packet, packets.Data) else None
        on_wire = frame_on_wire(float(frame.time) * 1e9, len(frame), data)
        ours.append(on_wire)
        if isinstance(packet, packets.NullAck) and (packet.burst_size, packet.burst_interval) != burst:
            burst = (packet.burst_size, packet.burst_interval)
            changes.append(on_wire.start_ns)
    data = [f for f in ours if f.data is not None]
    start, end = data[0].start_ns, data[-1].end_ns
    return [f for f in ours if start <= f.start_ns <= end], changes


def check_transfer(frames: list[Frame], changes_ns: list[float], burst_size: int,
                   clock_hz: int) -> tuple[list[int], list[Pacing]]:
    """The intervals the board was given in turn (each read from its own packets), and
    the pacing on each."""
    parts = split(frames, changes_ns)
    intervals = [interval_of(part, clock_hz) for part in parts]
    return intervals, [check(part, interval, burst_size, clock_hz) for part, interval in zip(parts, intervals)]
