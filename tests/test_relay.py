"""The UDP relay behind ``netblt netem``: a bottleneck it stands for keeps its rate even
when the relay's host is too busy to run it on time."""

import selectors
import statistics
import time

import pytest

from netblt.driver.transport import Transport
from netblt.sim.wan import relay as relay_module
from netblt.sim.wan.netem import LATE, InFlight, Path, PathConfig, precise_selector
from netblt.sim.wan.relay import Relay

SPACING = 0.001
"""1,000-byte datagrams through an 8 Mb/s bottleneck."""


@pytest.fixture
def relay():
    far = Transport("udp", ("127.0.0.1", 0))
    relay = Relay(("127.0.0.1", 0), far.sock.getsockname()[:2], PathConfig(rate_bps=8e6, queue_bytes=1 << 20))
    yield relay
    relay.front.close()
    relay.back.close()
    far.close()


def test_a_relay_that_runs_late_sends_what_it_holds_no_faster_than_its_bottleneck(relay, monkeypatch):
    sent: list[int] = []
    monkeypatch.setattr(relay_module, "_send", lambda due: sent.append(len(due)))
    near = Transport("udp", ("127.0.0.1", 0))
    for _ in range(20):
        near.sock.sendto(bytes(1000), relay.address)
    time.sleep(0.05)  # all in the relay's socket
    near.close()
    relay._read(relay.front, time.monotonic())
    queued = relay.in_flight.times()
    assert len(queued) + sum(sent) == 20 and len(queued) >= 18
    late = queued[0] + 0.1  # the relay's host ran something else for 100 ms
    relay_module._send(relay.in_flight.due(late))
    held = relay.in_flight.times()
    assert sent[-1] == 1 and len(held) == len(queued) - 1  # the first due at once, not all
    assert held[0] == pytest.approx(late + SPACING)
    assert all(b - a == pytest.approx(SPACING) for a, b in zip(held, held[1:]))
    # What arrives next queues behind what the stalled link still holds.
    assert relay.stats.forward.busy_until == pytest.approx(held[-1])
    assert relay.in_flight.stalls == 1 and relay.in_flight.stalled == pytest.approx(0.1)


def test_a_relay_a_moment_late_sends_what_is_due_without_moving_the_rest():
    path = Path(PathConfig(rate_bps=8e6))
    in_flight: InFlight[int] = InFlight([path])
    for number in range(20):
        for when, _ in path.send(bytes(1000), 10.0):
            in_flight.add(when, number)
    queued = in_flight.times()
    assert queued[1] - queued[0] == pytest.approx(SPACING) and 1.5 * SPACING < LATE
    assert in_flight.due(queued[0] + 1.5 * SPACING) == [0, 1]  # a wake-up's usual slack
    assert in_flight.times() == queued[2:] and in_flight.stalls == 0


def test_a_relay_sleeps_until_its_next_packet_is_due_and_no_longer_than_its_most():
    in_flight: InFlight[int] = InFlight([])
    assert in_flight.wait(10.0, most=0.05) == 0.05  # nothing held: until it looks again
    in_flight.add(10.002, 1)
    assert in_flight.wait(10.0, most=0.05) == pytest.approx(0.002)
    assert in_flight.wait(9.0, most=0.05) == 0.05 and in_flight.wait(10.003) == 0.0  # overdue: at once


def test_a_relays_loop_wakes_within_a_millisecond_when_its_next_packet_is_due():
    """A 20 Mb/s bottleneck's 1,448-byte packets are due 0.58 ms apart; a loop whose wait is
    rounded up to a millisecond (epoll's) sent them in clumps, and the receiver timing them
    read the path anywhere from 15.8 to 24.6 Mb/s. The median of 21 waits of 0.2 ms, so
    that a busy moment does not decide it."""
    near = Transport("udp", ("127.0.0.1", 0))
    selector = precise_selector()
    selector.register(near.sock, selectors.EVENT_READ)
    waits = []
    try:
        for _ in range(21):
            started = time.monotonic()
            assert selector.select(0.0002) == []
            waits.append(time.monotonic() - started)
    finally:
        selector.close()
        near.close()
    assert statistics.median(waits) < 0.0009, waits
