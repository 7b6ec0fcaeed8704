"""Rate selection (protocol/rate.py): the selector on its own, then whole transfers with no
--rate across emulated paths in virtual time (issue 15's cases)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from netblt.bench.rate_bench import default_params as auto
from netblt.protocol import events as ev
from netblt.protocol.connection import Connection
from netblt.protocol.events import FirstPass
from netblt.protocol.packets import Control, NullAck, Ok, Open
from netblt.protocol.params import Params, Timing, burst_rate_bps
from netblt.protocol.rate import (
    FASTER, FILTER, LIMITED, PROBE_GAINS, REGAIN, SMALL_START, SPAN, START_WINDOW, STARTUP_GAIN, UNCONFIRMED_GAIN,
    BurstOffers, RateSelector,
)
from netblt.sim.wan.netem import PathConfig
from netblt.sim.wan.virtual import simulate

M = 1e6
INTERVAL = 0.001


def sample(selector: RateSelector, rate: float, sending: float, lost: bool = False) -> float:
    """One sample spanning SPAN intervals; the offer after it."""
    selector.arrived(rate * SPAN * INTERVAL, SPAN * INTERVAL, sending, INTERVAL, lost)
    return selector.offer(sending)


def test_start_up_doubles_while_the_path_keeps_up_and_never_offers_more_than_negotiated():
    selector = RateSelector(950 * M)
    assert selector.offer(100 * M) == 100 * M  # no sample yet: the sender's own rate stands
    assert sample(selector, 100 * M, 100 * M) == STARTUP_GAIN * 100 * M
    assert sample(selector, 199 * M, 200 * M) == STARTUP_GAIN * 200 * M
    assert sample(selector, 600 * M, 600 * M) == 950 * M
    assert selector.startup


def test_a_bottleneck_ends_start_up_and_the_offer_cycles_around_its_rate():
    selector = RateSelector(950 * M)
    sample(selector, 95 * M, 95 * M)
    offer = sample(selector, 97 * M, 200 * M, lost=True)  # the queue drained at 97M, and overflowed
    assert not selector.startup and selector.bottleneck == 97 * M
    offers = [offer] + [sample(selector, 97 * M, 97 * M, lost=True) for _ in range(len(PROBE_GAINS) - 1)]
    assert sorted(offers) == sorted(g * 97 * M for g in PROBE_GAINS)
    assert offers[0] == PROBE_GAINS[1] * 97 * M


def test_one_pause_with_nothing_lost_is_not_a_bottleneck_but_two_are():
    selector = RateSelector(950 * M)
    sample(selector, 200 * M, 200 * M)
    # The receiving host paused, or a bottleneck: not yet a bottleneck, the offer held near what arrived.
    assert sample(selector, 300 * M, 400 * M) == UNCONFIRMED_GAIN * 300 * M
    assert selector.startup
    sample(selector, 300 * M, 400 * M)  # a queue filling
    assert not selector.startup and selector.bottleneck == 300 * M


def test_one_sample_far_below_the_sending_rate_holds_the_next_buffers_near_it():
    # A sender releases every buffer it held at its first OK's offer: after one slow
    # sample that offer is a little over what arrived, still in start-up.
    selector = RateSelector(950 * M)
    assert sample(selector, 1 * M, 950 * M) == UNCONFIRMED_GAIN * 1 * M
    assert selector.startup and not selector.bottleneck
    held = UNCONFIRMED_GAIN * 1 * M
    assert sample(selector, held, held) == STARTUP_GAIN * held  # the host had paused: doubling resumes


def test_once_measured_the_bottleneck_falls_only_with_losses_and_not_for_one_sample():
    selector = RateSelector(950 * M)
    sample(selector, 100 * M, 200 * M, lost=True)
    sample(selector, 60 * M, 100 * M)  # a pause: nothing lost
    assert selector.bottleneck == 100 * M
    for _ in range(FILTER - 1):  # the path halved: its queue overflows, sample after sample
        sample(selector, 50 * M, 100 * M, lost=True)
        assert selector.bottleneck > 50 * M  # the most of the last FILTER samples
    sample(selector, 50 * M, 100 * M, lost=True)
    assert selector.bottleneck == 50 * M


def test_a_probe_that_brings_more_than_the_bottleneck_passes_starts_up_again():
    selector = RateSelector(950 * M)
    sample(selector, 50 * M, 100 * M, lost=True)
    assert sample(selector, LIMITED * 56 * M, 56 * M) < STARTUP_GAIN * 50 * M  # within what 50M explains
    assert not selector.startup
    offer = sample(selector, 56 * M, 56 * M)  # 12% over the bottleneck: the path got faster
    assert 56 * M > FASTER * 50 * M and selector.startup and offer == REGAIN * 56 * M


def test_short_buffers_pool_into_one_sample_and_a_new_rate_starts_a_new_pool():
    selector = RateSelector(950 * M)
    tenth = SPAN * INTERVAL / 10
    for _ in range(9):
        selector.arrived(10 * M * tenth, tenth, 10 * M, INTERVAL, False)
    assert selector.offered is None  # nine tenths of a sample
    selector.arrived(10 * M * tenth, tenth, 20 * M, INTERVAL, False)  # another rate: those nine are dropped
    assert selector.offered is None
    for _ in range(9):
        selector.arrived(20 * M * tenth, tenth, 20 * M, INTERVAL, False)
    assert selector.offered == STARTUP_GAIN * 20 * M


def test_before_any_offer_a_first_pass_at_half_its_rate_or_less_is_a_sample_however_short():
    selector = RateSelector(10_000 * M)
    tenth = SPAN * INTERVAL / 10
    selector.arrived(10 * M * tenth, tenth, 10 * M, INTERVAL, False)  # kept up: wait for a whole sample
    assert selector.offered is None
    selector.arrived(900 * M * tenth, tenth, 9000 * M, INTERVAL, False)  # a tenth of it came
    assert selector.offered == pytest.approx(UNCONFIRMED_GAIN * 900 * M)
    selector.arrived(900 * M * tenth, tenth, 1125 * M, INTERVAL, False)  # an offer stands: whole samples again
    assert selector.offered == pytest.approx(UNCONFIRMED_GAIN * 900 * M)


def test_a_sender_capped_at_a_10G_line_starts_behind_a_gigabit_one_without_flooding_it():
    """512 KiB buffers at 10 Gb/s are one burst each, fewer intervals than a sample needs:
    the first OK offered nothing, and the 16 buffers it GO'd went at 10G into the gigabit
    line's queue (6.9% of 64 MiB resent, 3,407 packets dropped in 4 ms)."""
    line = 1e9 * 1448 / 1538
    path = PathConfig(delay=0.00005, rate_bps=line, queue_bytes=3_500_000)
    assert resent_share(transfer(64, path, 0.00005, auto(cap=10 * line))) < 0.001


def changed_pass(offers: BurstOffers, before: tuple[int, int], after: tuple[int, int], early: int,
                 delivered_share: float) -> None:
    """A 1024-packet buffer whose first ``early`` packets came at ``before`` and the rest at
    ``after``, the path delivering ``delivered_share`` of the latter in their time."""
    bits = 1448 * 8
    old, new = (burst_rate_bps(*burst, 1448) for burst in (before, after))
    since = (1024 - early) * bits / new
    arrivals = early + round((1024 - early) * delivered_share)
    offers.changed_pass(1024 * 1448, before, after, FirstPass(early * bits / old + since, arrivals, 0), since)


def test_in_start_up_a_first_pass_the_sender_sped_up_in_is_a_sample_of_its_part_since():
    """The offer comes in one buffer's OK while the next is already on its way, so that one
    begins at the old rate and ends at the new: its part since the change is a sample at the
    new rate, and each step of start-up takes a buffer, not two."""
    before, after = (10, 1), (20, 1)
    new = burst_rate_bps(*after, 1448)
    offers = BurstOffers(auto())
    changed_pass(offers, before, after, early=300, delivered_share=1.0)
    assert offers.selector.offered == pytest.approx(STARTUP_GAIN * new, rel=0.01)
    offers = BurstOffers(auto())
    changed_pass(offers, before, after, early=300, delivered_share=0.5)  # a bottleneck at half the new rate
    assert offers.selector.offered == pytest.approx(UNCONFIRMED_GAIN * new / 2, rel=0.01)
    # Past start-up the rate before the change is not known to have been carried: no sample.
    offers = BurstOffers(auto())
    offers.selector.startup = False
    changed_pass(offers, before, after, early=300, delivered_share=1.0)
    assert offers.selector.offered is None


def test_buffers_smaller_than_a_burst_that_arrive_at_once_count_and_the_rate_holds():
    """A receiver reading coalesced datagrams times each read once: of 16 KiB buffers sent
    71 packets a burst, most came in one read (no time between their first packet and
    last) and one a burst straddled its pause. Counting only those made the path look six
    times slower than it was, and the offers walked a loopback transfer down from 938 to
    10 Mb/s; counting every buffer's bits, the offer holds the sender's rate."""
    burst, packets = (71, 7), 12
    params = replace(auto(), packet_size=1000, buffer_size=packets * 1000, burst_size=71, burst_interval=7,
                     max_buffers=16)
    conn = Connection(active=False, sender=False, params=params, timing=Timing())
    opened = conn.handle(ev.PacketReceived(Open(uid=1, buffer_size=params.buffer_size, packet_size=1000,
                                                burst_size=71, burst_interval=7, death_timer=20,
                                                max_buffers=16, data_checksum=False, write_mode=True,
                                                transfer_size=200 * params.buffer_size)), 0.0)
    assert any(isinstance(action, ev.Admit) for action in opened)
    conn.admit(0.0)
    conn.handle(ev.PacketReceived(NullAck(0, *burst)), 0.0)
    offers, now = [], 0.0
    for n in range(1, 200):
        straddles = n % 6 == 0  # six buffers a burst; one a burst spans its 7 ms pause
        now += 0.007 if straddles else 0.00002
        conn.handle(ev.FirstPacket(n, last_buffer=False), now)
        conn.handle(ev.BufferComplete(n, params.buffer_size, FirstPass(0.007 if straddles else 0.0, packets, 0)),
                    now)
        for action in conn.handle(ev.BufferReleased(n), now):
            if isinstance(action, ev.Transmit) and isinstance(action.packet, Control):
                offers += [(m.burst_size, m.burst_interval) for m in action.packet.messages if isinstance(m, Ok)]
    sending = burst_rate_bps(*burst, 1000)
    assert len(offers) > 150
    assert burst_rate_bps(*offers[-1], 1000) >= LIMITED * sending


# -- whole transfers in virtual time --------------------------------------------------------------


def transfer(megabytes: int, forward: PathConfig, delay: float, params: Params | None = None):
    data = os.urandom(megabytes << 20)
    result = simulate(data, params or auto(), forward=forward, backward=PathConfig(delay=delay), seed=1,
                      time_limit=900)
    assert result.ok, result.reason
    assert result.received == data
    return result


def steady_mbps(result, after: float = 0.0) -> float:
    """RFC 1030's steady state; with ``after``, of the buffers done from then on only."""
    if not after:
        return result.receiver.progress.steady_state_bps() / M
    done = [(t, n) for t, n in result.receiver.progress.done_at if t >= after]
    return 8 * sum(n for _, n in done[1:-1]) / (done[-2][0] - done[0][0]) / M


def resent_share(result) -> float:
    return result.sender.dp.tx.resent / result.forward.counts["sent"]


def test_a_100M_bottleneck_with_a_1MB_queue_is_found_with_almost_nothing_resent(monkeypatch):
    path = PathConfig(delay=0.02, rate_bps=100e6, queue_bytes=1 << 20)
    result = transfer(100, path, 0.02)
    assert steady_mbps(result) >= 90 and resent_share(result) <= 0.01
    # Without selection: the sender at its cap throughout, the receiver's offers repeating it.
    monkeypatch.setattr(RateSelector, "arrived", lambda *args, **kwargs: None)
    fixed = transfer(100, path, 0.02, replace(auto(), auto_rate=False))
    assert resent_share(fixed) > 0.1


@pytest.mark.parametrize("rate, megabytes, one_way, share", [(1e6, 8, 0.025, 0.9), (10e6, 40, 0.3, 0.9),
                                                             (10e6, 60, 0.9, 0.85)],
                         ids=["1M-50ms", "10M-geostationary", "10M-1.8s"])
def test_slow_and_long_paths_run_near_their_bottleneck(rate, megabytes, one_way, share):
    result = transfer(megabytes, PathConfig(delay=one_way, rate_bps=rate, queue_bytes=1 << 20), one_way)
    assert steady_mbps(result) >= share * rate / M


def test_with_no_bottleneck_the_cap_is_reached():
    result = transfer(150, PathConfig(delay=0.00005), 0.00005)
    assert steady_mbps(result, after=0.3) >= 900  # after a start-up of about 0.2 s


def test_start_up_doubles_the_rate_a_buffer_at_a_time():
    """Buffers too large to start at the cap (1,024 packets) start at an eighth of it, and
    each buffer of start-up comes twice as fast as the one before (the fourth partly at the
    cap), the fifth at the cap. Were a buffer the sender sped up in no sample, each step
    would take two buffers (the fifth at half the cap)."""
    large = auto(packets=1024, buffers=8)
    done = [t for t, _ in transfer(16, PathConfig(delay=0.00005), 0.00005, large).receiver.progress.done_at]
    at_the_cap = 1448 * 1024 * 8 / large.rate_bps
    assert done[4] - done[3] <= 1.1 * at_the_cap


def test_a_short_path_behind_a_slow_link_resends_little_at_the_defaults():
    """Two default buffers are what a bottleneck's queue takes before the first OK comes
    (SMALL_START), so the sender starts at its cap without flooding a 10 Mb/s link on a
    short path. Buffers of 1,024 packets start at an eighth of the cap, and two of them
    (3 MB) lost 12% of 16 MiB into that link's 1 MB queue."""
    assert START_WINDOW * auto().buffer_size <= SMALL_START
    result = transfer(16, PathConfig(delay=0.0005, rate_bps=10e6, queue_bytes=1 << 20), 0.0005)
    assert resent_share(result) <= 0.05 and steady_mbps(result) >= 9


def test_a_sender_capped_at_its_gigabit_line_never_overflows_the_lines_queue():
    """host/cli.py caps a sender at a gigabit line at most. The 950M it replaced, 0.9% over
    it, is within the selector's tenth of what arrives (never a bottleneck to it), so the
    line's queue fills until it overflows."""
    line = 1e9 * 1448 / 1538  # the data of 1,500-byte frames on the wire
    path = PathConfig(delay=0.00005, rate_bps=line, queue_bytes=1 << 20)
    assert 0.99 * line <= auto().rate_bps <= line
    assert resent_share(transfer(64, path, 0.00005)) < 0.001
    assert resent_share(transfer(64, path, 0.00005, auto(cap=950e6))) > 0.005


@pytest.mark.parametrize("loss", [PathConfig(loss=0.01), PathConfig(burst_loss=0.002)], ids=["random", "bursts"])
def test_loss_alone_does_not_slow_the_sender(loss):
    result = transfer(100, replace(loss, delay=0.02, rate_bps=100e6, queue_bytes=1 << 20), 0.02)
    assert steady_mbps(result) >= 90 and resent_share(result) <= 0.02


def test_on_a_slow_long_path_nothing_is_asked_for_before_it_could_come():
    # RFC 1030's Wideband channel, 10-packet buffers: the first packets come a thousand
    # times slower than the sender's cap, and the sender holds all but two buffers until
    # the first OK reaches it. Data timers that took the cap's pace, or fired for buffers
    # not yet started, asked for whole buffers again (22% of packets resent, 17 twice).
    params = Params(buffer_size=14320, packet_size=1432, burst_size=165, burst_interval=2, max_buffers=22,
                    data_checksum=True, death_timer=60, auto_rate=True)
    path = PathConfig(delay=0.9, jitter=0.02, loss=0.01, rate_bps=1.05e6, queue_bytes=64_000)
    result = transfer(1, path, 0.9, params)
    assert result.receiver.dp.rx.duplicates == 0
    assert resent_share(result) <= 0.03


@pytest.mark.parametrize("before, after", [(100e6, 50e6), (50e6, 100e6)], ids=["halves", "doubles"])
def test_a_bottleneck_that_changes_mid_transfer_is_followed(before, after):
    path = PathConfig(delay=0.02, rate_bps=before, queue_bytes=1 << 20, rate_changes=((4.0, after),))
    result = transfer(100, path, 0.02)
    assert steady_mbps(result, after=6.0) >= 0.85 * after / M
    assert resent_share(result) <= 0.1
