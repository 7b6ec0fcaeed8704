"""Per-packet pieces of the data path: reassembly, the priority pipe, the pacer."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netblt.driver.core import DataPathCore
from netblt.driver.framing import DataHeader, FrameError, build_header, parse_header
from netblt.driver.pacer import BurstPacer
from netblt.driver.reassembly import ReceiveBuffers
from netblt.driver.txqueue import TransmitQueue
from netblt.host import events as ev
from netblt.host.codec import decode, encode
from netblt.host.packets import Data, Open, Refused
from netblt.host.params import Params

PS, BS = 100, 1000  # 10 packets per buffer


def header(buffer, packet, length=PS, ldata=False, last=False):
    return DataHeader(ldata, 24 + length, 1, 2, buffer, 0, packet, 0, last)


def datagram(packet, payload):
    return memoryview(bytes(24) + payload)


def test_fast_header_matches_the_codec():
    payload = memoryview(os.urandom(37))
    buf = bytearray(24)
    padding = build_header(buf, local_port=5, foreign_port=6, buffer=9, packet=3, high_ack=4, ldata=True,
                           last_buffer=True, payload=payload, data_checksum=True)
    wire = bytes(buf) + payload + padding
    assert wire == encode(Data(9, 3, 4, bytes(payload), True, True), 5, 6, data_checksum=True)
    assert decode(wire, data_checksum=True).packet.payload == payload
    h = parse_header(memoryview(wire), data_checksum=True)
    assert (h.buffer, h.packet, h.high_ack, h.ldata, h.last_buffer, h.length) == (9, 3, 4, True, True, 61)


@pytest.mark.parametrize("damage, reason", [
    (lambda w: w[:20], "truncated"),
    (lambda w: w[:2] + b"\x05" + w[3:], "version"),
    (lambda w: w[:4] + b"\x00\x10" + w[6:], "length"),
    (lambda w: w[:12] + b"\xff" + w[13:], "checksum"),
    (lambda w: w[:-1] + bytes([w[-1] ^ 1]), "data checksum"),
])
def test_bad_data_packets_are_named(damage, reason):
    wire = encode(Data(1, 2, 3, b"abcd" * 8), 1, 2, data_checksum=True)
    with pytest.raises(FrameError, match=f"^{reason}$"):
        parse_header(memoryview(damage(wire)), data_checksum=True)


def test_reassembly_places_data_and_reports_buffer_events():
    rx = ReceiveBuffers(PS, BS)
    rx.post(1, 10)
    data = os.urandom(950)
    out = []
    for p in reversed(range(10)):  # reordered: LDATA first
        chunk = data[p * PS:(p + 1) * PS]
        out += rx.accept(header(1, p, len(chunk), ldata=p == 9), datagram(p, chunk), 0.0)
    # Reversed, only the first to arrive (the LDATA) is first-pass: the other nine came after it, lower.
    first_pass = ev.FirstPass(spread=0.0, arrivals=1, lost=9)
    assert out == [ev.FirstPacket(1, False), ev.LdataSeen(1, 10), ev.BufferComplete(1, 950, first_pass)]
    assert bytes(rx.take(1)) == data


def test_a_buffers_first_pass_is_timed_with_everything_that_arrived_meanwhile():
    """What the rate selector is told: packets 0-9 in order, 3 lost and asked for again,
    another buffer's packet in between; the first pass ends when the missing are asked for."""
    rx = ReceiveBuffers(PS, BS)
    rx.post(1, 10)
    rx.post(2, 10)
    data = os.urandom(950)
    at = iter(range(100))
    out = []
    for p in [0, 1, 2, 4, 5, 6, 7, 8, 9]:
        chunk = data[p * PS:(p + 1) * PS]
        out += rx.accept(header(1, p, len(chunk), ldata=p == 9), datagram(p, chunk), next(at) / 1000)
        if p == 4:
            rx.accept(header(2, 0, PS), datagram(0, data[:PS]), next(at) / 1000)
    assert rx.missing(1) == (3,)
    out += rx.accept(header(1, 3, PS), datagram(3, data[3 * PS:4 * PS]), 1.0)  # the resend, much later
    (complete,) = [e for e in out if isinstance(e, ev.BufferComplete)]
    assert complete.first_pass == ev.FirstPass(spread=0.009, arrivals=10, lost=1)


def test_missing_list_is_exactly_what_was_withheld():
    rx = ReceiveBuffers(PS, BS)
    rx.post(1, 10)
    withheld = {0, 3, 4, 8}
    for p in set(range(10)) - withheld:
        rx.accept(header(1, p, ldata=p == 9), datagram(p, bytes(PS)), 0.0)
    assert rx.missing(1) == tuple(sorted(withheld))


def test_missing_list_without_ldata_covers_the_capacity():
    rx = ReceiveBuffers(PS, BS)
    rx.post(1, 10)
    rx.accept(header(1, 2), datagram(2, bytes(PS)), 0.0)
    assert rx.missing(1) == (0, 1, 3, 4, 5, 6, 7, 8, 9)


@pytest.mark.parametrize("bad, reason", [
    (header(2, 0), "unknown buffer"),
    (header(1, 10), "outside buffer"),
    (header(1, 9, length=PS + 1, ldata=True), "outside buffer"),
    (header(1, 3, length=PS - 1), "data length"),
])
def test_hostile_data_is_counted_and_dropped(bad, reason):
    rx = ReceiveBuffers(PS, BS)
    rx.post(1, 10)
    assert rx.accept(bad, datagram(0, b"\xee" * (bad.length - 24)), 0.0) == []
    assert rx.dropped[reason] == 1
    assert rx.missing(1) == tuple(range(10))


def test_packets_past_the_ldata_and_a_second_ldata_are_dropped():
    rx = ReceiveBuffers(PS, BS)
    rx.post(1, 10)
    rx.accept(header(1, 4, 50, ldata=True), datagram(4, bytes(50)), 0.0)
    rx.accept(header(1, 5), datagram(5, bytes(PS)), 0.0)
    rx.accept(header(1, 3, 20, ldata=True), datagram(3, bytes(20)), 0.0)
    assert rx.dropped["past ldata"] == 2
    assert rx.missing(1) == (0, 1, 2, 3)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 70), st.integers(0, 300), st.booleans()),
                max_size=60))
def test_no_packet_ever_writes_outside_its_slot(packets):
    rx = ReceiveBuffers(PS, BS)
    rx.post(1, 10)
    rx.post(2, 10)
    for buffer, packet, length, ldata in packets:
        rx.accept(header(buffer, packet, length, ldata), datagram(packet, b"\x01" * length), 0.0)
    for number in (1, 2):
        slot = rx._slots[number]
        assert len(slot.data) == BS and len(slot.bitmap) == 10
    assert b"\x01" not in rx._slots[2].data or any(b == 2 for b, *_ in packets)


def test_priority_pipe_resends_lower_buffers_first_and_in_packet_order():
    tx = TransmitQueue(PS)
    tx.load(1, bytes(BS), last=False)
    tx.load(2, bytes(250), last=True)
    first = [tx.pop()[:2] for _ in range(12)]
    assert first == [(1, p) for p in range(10)] + [(2, 0), (2, 1)]
    tx.resend(1, (7, 2))
    rest = []
    while (item := tx.pop()) is not None:
        rest.append((item.buffer, item.packet, item.ldata, item.last_buffer))
    assert rest == [(1, 2, False, False), (1, 7, False, False), (2, 2, True, True)]
    assert tx.resent == 2


def test_resend_past_the_ldata_sends_the_ldata_and_unknown_buffers_nothing():
    tx = TransmitQueue(PS)
    tx.load(3, bytes(250), last=True)
    while tx.pop():
        pass
    assert tx.resend(3, (5, 9, 2)) == 1  # 5 and 9 both mean "your LDATA"
    assert tx.pop()[:2] == (3, 2) and tx.pop() is None
    assert tx.resend(4, (0,)) == 0


def test_empty_buffer_is_one_empty_ldata():
    tx = TransmitQueue(PS)
    tx.load(1, b"", last=True)
    item = tx.pop()
    assert (item.packet, len(item.payload), item.ldata, item.last_buffer) == (0, 0, True, True)


def test_pacer_bursts_on_schedule_and_restarts_after_idle():
    pacer = BurstPacer(3, 0.01)
    starts = []
    now = 0.0
    while len(starts) < 4:
        if pacer.allowance(now):
            starts.append(round(now, 6))
            pacer.sent(pacer.remaining)
        now += 0.001
    assert starts == [0.0, 0.01, 0.02, 0.03]
    assert pacer.allowance(0.0405) == 3  # a late burst keeps the schedule
    pacer.sent(3)
    assert pacer.next_burst == pytest.approx(0.05)
    # Held up 3.5 intervals: the missed bursts go back to back, and the average rate holds.
    assert pacer.allowance(0.085) == 3
    pacer.sent(3)
    assert pacer.allowance(0.085) == 3 and pacer.next_burst == pytest.approx(0.07)
    pacer.sent(3)
    assert pacer.allowance(1.0) == 3 and pacer.next_burst == pytest.approx(1.01)  # idle: restart


def test_core_round_trip_from_send_buffer_to_complete():
    params = Params(buffer_size=BS, packet_size=PS, burst_size=4, burst_interval=1, max_buffers=2,
                    data_checksum=True, death_timer=5)
    a, b = DataPathCore(10, 20), DataPathCore(20, 10)
    a.configure(params, "b")
    a.set_rate(4, 1)
    b.configure(params, "a")
    b.post_receive(1, 10)
    data = os.urandom(BS)
    a.send_buffer(1, data, last=True)
    now = 0.0
    while not any(isinstance(e, ev.BufferComplete) for e in b.events):
        while (item := a.next_packet(now)) is not None:
            header_, payload, padding = item
            b.receive(memoryview(header_ + bytes(payload) + padding), now, "a")
        now += 0.001
    assert now == pytest.approx(0.003)  # 10 packets at 4 per ms: bursts at 0, 1, 2 ms
    assert bytes(b.take(1)) == data
    assert a.next_packet(now) is None and a.take_events() == [ev.TransmitIdle()]


def test_only_the_peers_data_is_placed():
    params = Params(buffer_size=BS, packet_size=PS, burst_size=4, burst_interval=1, max_buffers=2,
                    data_checksum=False, death_timer=5)
    core = DataPathCore(20, 10)
    core.configure(params, "peer")
    core.post_receive(1, 10)
    wire = encode(Data(1, 0, 0, b"\xee" * PS), 10, 20)
    core.receive(memoryview(wire), 0.0, "stranger")
    assert core.dropped["not from the peer"] == 1 and core.rx.missing(1) == tuple(range(10))
    core.receive(memoryview(wire), 0.0, "peer")
    assert core.rx.missing(1) == tuple(range(1, 10))


def test_each_opener_is_answered_on_its_own_netblt_port():
    opener = Open(uid=1, buffer_size=BS, packet_size=PS, burst_size=1, burst_interval=1, death_timer=5,
                  max_buffers=1, data_checksum=False, write_mode=True)
    core = DataPathCore(20)
    core.receive(memoryview(encode(opener, 11, 20)), 0.0, "A")
    core.receive(memoryview(encode(opener, 66, 20)), 0.0, "B")  # arrives later, from someone else
    assert [e.source for e in core.take_events()] == ["A", "B"]
    assert decode(core.encode(Refused("busy"), "B")).foreign_port == 66
    core.configure(Params(buffer_size=BS, packet_size=PS, burst_size=1, burst_interval=1, max_buffers=1,
                          data_checksum=False, death_timer=5), "A")
    assert decode(core.encode(Refused("x"), "A")).foreign_port == 11


def test_late_copies_of_a_delivered_buffer_are_duplicates_not_drops():
    rx = ReceiveBuffers(PS, BS)
    rx.post(1, 10)
    rx.post(2, 10)
    rx.drop(1)  # delivered
    rx.accept(header(1, 3), datagram(3, bytes(PS)), 0.0)
    rx.accept(header(7, 3), datagram(3, bytes(PS)), 0.0)
    assert rx.duplicates == 1 and dict(rx.dropped) == {"unknown buffer": 1}
