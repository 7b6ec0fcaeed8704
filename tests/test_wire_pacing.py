"""bench/wire_pacing.py on frames made by hand: what it accepts and each fault it names."""

from __future__ import annotations

from netblt.bench.wire_pacing import check, frame_on_wire

CLOCK_HZ = 50_000_000
CYCLE = 20.0
INTERVAL = 1000
DATA_BYTES = 1500
"""A DATA frame: 1512 bytes with preamble and FCS, 605 cycles, then 4.8 cycles of gap."""


def data(start_cycles: float, buffer: int, packet: int):
    start_ns = 1_000_000 + start_cycles * CYCLE
    return frame_on_wire(start_ns + (8 + DATA_BYTES + 4) * 8, DATA_BYTES, (buffer, packet))


def other(start_cycles: float, length: int = 60):
    start_ns = 1_000_000 + start_cycles * CYCLE
    return frame_on_wire(start_ns + (8 + length + 4) * 8, length)


def paced(count: int = 8, first: float = 370.0) -> list:
    """A buffer's first packet mid-interval, the rest on a grid of INTERVAL cycles."""
    return [data(first, 1, 0)] + [data(1000.0 * k, 1, k) for k in range(1, count)]


def test_packets_on_the_grid_pass():
    result = check(paced(), INTERVAL, 1, CLOCK_HZ)
    assert not result.faults
    assert (result.on_grid, result.waited, result.first_of_buffer, result.most_ahead) == (7, 0, 1, 0)


def test_starts_scattered_by_the_wires_clock_about_a_grid_between_two_cycles_pass():
    """The wire stamps starts in its own 8 ns, so a grid point 643.5 cycles past the
    origin shows as 643.4 or 643.6 (seen in a simulation: 15 and 12 packets)."""
    frames = [data(0.0, 1, 0)] + [data(1000.0 * k + 643.5 + (0.1 if k % 3 else -0.1), 1, k) for k in range(1, 9)]
    result = check(frames, INTERVAL, 1, CLOCK_HZ)
    assert not result.faults
    assert result.on_grid == 8 and result.worst_error < 0.25 and result.most_ahead == 0


def test_a_packet_that_waited_for_a_busy_wire_passes_if_it_went_as_soon_as_the_wire_freed():
    frames = paced()
    frames[3] = data(3000 - 20 + 28.8 + 4.8, 1, 3)  # behind a 60-byte frame begun 20 cycles early
    frames.append(other(3000 - 20))
    result = check(frames, INTERVAL, 1, CLOCK_HZ)
    assert not result.faults and result.waited == 1


def test_a_packet_late_on_a_free_wire_is_a_fault():
    frames = paced()
    frames[3] = data(3002, 1, 3)
    assert check(frames, INTERVAL, 1, CLOCK_HZ).faults == ["buffer 1 packet 3: +2.0 cycles from its grid point"]


def test_a_packet_that_dawdled_after_the_wire_freed_is_a_fault():
    frames = paced()
    frames[3] = data(3000 + 60, 1, 3)
    frames.append(other(3000 - 20))
    assert check(frames, INTERVAL, 1, CLOCK_HZ).faults == [
        "buffer 1 packet 3: +60.0 cycles from its grid point, +46.4 from the wire freeing"]


def test_an_interval_one_cycle_off_is_caught():
    frames = [data(370, 1, 0)] + [data(1001.0 * k, 1, k) for k in range(1, 8)]
    assert check(frames, INTERVAL, 1, CLOCK_HZ).faults


def test_more_packets_than_the_bursts_allow_is_a_fault():
    frames = paced() + [data(5000 + 650, 2, 0)]  # a second buffer's first packet, in a used interval
    assert check(frames, INTERVAL, 1, CLOCK_HZ).faults == ["up to 1 packet(s) ahead of 1 per interval"]
    assert not check(frames, INTERVAL, 2, CLOCK_HZ).faults


def test_a_pacer_granting_every_packet_at_once_is_caught_even_when_each_one_waited_for_the_wire():
    """Unpaced: each DATA right behind the one before, so the wire was always busy."""
    frames = [data(370 + 610 * k, 1, k) for k in range(8)]
    assert any("ahead of 1 per interval" in fault for fault in check(frames, INTERVAL, 1, CLOCK_HZ).faults)


def test_a_changed_interval_starts_a_new_grid_whose_first_packet_is_free():
    from netblt.bench.wire_pacing import interval_of, split
    frames = [data(370, 1, 0)] + [data(1000.0 * k, 1, k) for k in range(1, 5)] \
        + [data(4000 + 450 + 1200.0 * k, 1, 5 + k) for k in range(4)]  # 1200 cycles from 4450 on
    change_ns = 1_000_000 + 4100 * CYCLE
    parts = split(frames, [change_ns])
    assert [interval_of(part, CLOCK_HZ) for part in parts] == [1000, 1200]
    assert [part[0].restarts for part in parts] == [False, True]
    assert not any(check(part, interval, 1, CLOCK_HZ).faults for part, interval in zip(parts, (1000, 1200)))
    assert check(frames, INTERVAL, 1, CLOCK_HZ).faults  # one grid for both is wrong


def test_a_stretch_too_short_to_show_its_interval_is_counted_not_judged():
    """Two rate changes close together leave a buffer's first packet and one more between
    them: no interval to judge by (it used to divide by zero)."""
    from netblt.bench.wire_pacing import check_transfer
    frames = paced(4) + [data(4000 + 300, 2, 0), data(4000 + 900, 2, 1)] + [data(6000 + 1000.0 * k, 2, 2 + k)
                                                                             for k in range(4)]
    cuts = [1_000_000 + 4100 * CYCLE, 1_000_000 + 5950 * CYCLE]
    intervals, results = check_transfer(frames, cuts, 1, CLOCK_HZ)
    assert intervals == [1000, 0, 1000]
    assert [r.unjudged for r in results] == [0, 2, 0] and not any(r.faults for r in results)
