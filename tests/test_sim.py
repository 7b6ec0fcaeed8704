"""Whole transfers between two real engines over the seeded virtual-time WAN."""

import hashlib
import io
import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from netblt.protocol.endpoint import Admission
from netblt.protocol.connection import State
from netblt.host.files import TRAILER, TRAILER_MAGIC, StreamSource
from netblt.protocol.params import Params
from netblt.sim.wan import virtual
from netblt.sim.wan.netem import Path, PathConfig
from netblt.sim.wan.virtual import simulate

PARAMS = Params(buffer_size=8000, packet_size=500, burst_size=8, burst_interval=2, max_buffers=4,
                data_checksum=True, death_timer=30)
DATA = os.urandom(100_003)


def test_clean_path_delivers_every_byte_with_no_retransmission():
    result = simulate(DATA, PARAMS, forward=PathConfig(delay=0.01), backward=PathConfig(delay=0.01))
    assert result.ok, result.reason
    assert result.received == DATA
    assert result.sender.dp.tx.resent == 0 and result.receiver.conn.stats.data_timeouts == 0


def test_read_mode_the_receiver_opens():
    result = simulate(DATA, PARAMS, sender_active=False, forward=PathConfig(delay=0.01, loss=0.02),
                      backward=PathConfig(delay=0.01))
    assert result.ok, result.reason
    assert result.received == DATA
    assert result.receiver.conn.active and not result.sender.conn.active


def test_empty_and_exactly_aligned_transfers():
    for data in (b"", os.urandom(PARAMS.buffer_size * 3), os.urandom(PARAMS.packet_size)):
        result = simulate(data, PARAMS, forward=PathConfig(loss=0.05), seed=3)
        assert result.ok, result.reason
        assert result.received == data


def test_passive_end_restricts_and_both_use_the_result():
    limits = replace(PARAMS, packet_size=300, max_buffers=2, burst_interval=5)
    result = simulate(DATA, PARAMS, receiver_params=limits)
    assert result.ok and result.received == DATA
    assert result.sender.progress.params == replace(limits, death_timer=PARAMS.death_timer)


def test_a_path_that_goes_dead_fails_both_ends_with_the_death_timer():
    dead = PathConfig(loss=1.0)
    result = simulate(DATA, replace(PARAMS, death_timer=5), forward=dead, backward=dead)
    assert not result.ok
    assert result.sender.progress.result.reason == "no answer to OPEN in 5 s (5 tries)"  # at 0, 0.5, 1.5, 2.75, 4


class CutPath(Path):
    """A path that goes silent after its first 40 datagrams."""

    def send(self, datagram, now):
        return [] if self.counts["sent"] >= 40 else super().send(datagram, now)


def test_silence_mid_transfer_ends_in_death_timer(monkeypatch):
    monkeypatch.setattr(virtual, "Path", CutPath)
    result = simulate(DATA, replace(PARAMS, death_timer=4))
    assert not result.ok
    for end in (result.sender, result.receiver):
        assert end.progress.result.reason == "death timer expired: nothing heard from the peer for 4 s"
    assert len(result.received) < len(DATA)


MODERATE = PathConfig(delay=0.02, jitter=0.005, loss=0.1, reorder=0.1, duplicate=0.05, corrupt=0.05)


@pytest.mark.parametrize("seed", range(20))
def test_moderate_impairment_always_recovers(seed):
    result = simulate(DATA, PARAMS, forward=MODERATE, backward=MODERATE, seed=seed)
    assert result.ok, result.reason
    assert result.received == DATA
    assert result.receiver.conn.stats.data_timeouts > 0  # the loss was real and was repaired


conditions = st.builds(
    PathConfig,
    delay=st.sampled_from([0.0, 0.005, 0.1]),
    jitter=st.sampled_from([0.0, 0.001, 0.02]),
    loss=st.floats(0, 0.2),
    burst_loss=st.floats(0, 0.05),
    burst_length=st.floats(1, 10),
    reorder=st.floats(0, 0.2),
    duplicate=st.floats(0, 0.1),
    corrupt=st.floats(0, 0.1),
    rate_bps=st.sampled_from([0.0, 5e6]),
    queue_bytes=st.sampled_from([20_000, 1 << 20]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(forward=conditions, backward=conditions, seed=st.integers(0, 2**31),
       size=st.integers(0, 60_000), max_buffers=st.integers(1, 6))
def test_any_loss_reordering_duplication_and_corruption_delivers_identical_data_or_fails_clearly(
        forward, backward, seed, size, max_buffers):
    data = os.urandom(size)
    result = simulate(data, replace(PARAMS, max_buffers=max_buffers), forward=forward,
                      backward=backward, seed=seed, time_limit=3600)
    event("delivered" if result.ok else "failed")
    if result.ok:
        assert result.received == data
    else:
        # Only a path that stayed silent long enough may stop a transfer, and it says so.
        ends = (result.sender, result.receiver)
        # A listener that never heard an OPEN is still listening: it has no timer to run out.
        assert all(e.progress.result or e.conn.state is State.LISTEN for e in ends)
        reasons = [e.progress.result.reason for e in ends if e.progress.result]
        assert any(r.startswith(("death timer expired", "no answer to OPEN")) for r in reasons), reasons
        assert not (result.receiver.progress.result and result.receiver.progress.result.ok
                    and result.received != data)


def test_a_stream_of_unknown_length_ends_where_its_data_and_trailer_end():
    for size in (0, 1, PARAMS.buffer_size - TRAILER.size, PARAMS.buffer_size, 3 * PARAMS.buffer_size + 7):
        data = os.urandom(size)
        source = StreamSource(io.BytesIO(data).read)
        result = simulate(b"", PARAMS, source=source, forward=PathConfig(delay=0.01, loss=0.05), seed=size)
        assert result.ok, result.reason
        content, trailer = result.received[:-TRAILER.size], result.received[-TRAILER.size:]
        assert content == data
        assert TRAILER.unpack(trailer) == (TRAILER_MAGIC, size, hashlib.sha256(data).digest())


def test_a_resumed_transfer_sends_only_the_buffers_the_receiver_lacks():
    held = frozenset({2, 4, 13})  # 13 is the last of 13 buffers
    result = simulate(DATA, PARAMS, forward=PathConfig(delay=0.01, loss=0.05), seed=4,
                      admit=lambda request: Admission(held=held, last=13))
    assert result.ok, result.reason
    size = PARAMS.buffer_size
    for n in range(1, 14):
        part = slice((n - 1) * size, n * size)
        expected = bytes(len(DATA[part])) if n in held else DATA[part]
        assert result.received[part].ljust(len(DATA[part]), b"\0") == expected, n
    skipped = sum(len(DATA[(n - 1) * size:n * size]) for n in held)
    assert result.sender.progress.resumed_bytes == skipped
    assert result.sender.progress.bytes_done == len(DATA) - skipped
    packets = sum(-(-len(DATA[(n - 1) * size:n * size]) // PARAMS.packet_size) for n in range(1, 14) if n not in held)
    assert result.sender.dp.tx.sent - result.sender.dp.tx.resent == packets
