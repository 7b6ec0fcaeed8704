"""Per-packet pieces of the data path: reassembly, the priority pipe, the pacer."""

import os
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netblt.driver.core import DataPathCore
from netblt.driver.compiled import fastpath
from netblt.driver.framing import FrameError, build_header, parse_header
from netblt.driver.burst_pacer import BurstPacer
from netblt.driver.receive_buffers import PythonSlots, ReceiveBuffers
from netblt.driver.txqueue import TransmitQueue
from netblt.protocol import events as ev
from netblt.protocol.codec import decode, encode
from netblt.protocol.packets import Data, Open, Refused
from netblt.protocol.params import Params

PS, BS = 100, 1000  # 10 packets per buffer


IMPLEMENTATIONS = [PythonSlots] + ([fastpath.Slots] if fastpath else [])
"""Every test of the receive buffers runs on the pure-Python code and on the compiled one."""


@pytest.fixture(params=IMPLEMENTATIONS, ids=lambda impl: impl.__module__.rsplit(".", 1)[-1])
def rx(request):
    return request.param(PS, BS, 2, 1, False)  # receiving on NETBLT port 2 from port 1


def datagram(buffer, packet, payload, ldata=False, last=False, high_ack=0):
    """A DATA/LDATA packet from port 1 to port 2, as the wire carries it."""
    head = bytearray(24)
    padding = build_header(head, local_port=1, foreign_port=2, buffer=buffer, packet=packet, high_ack=high_ack,
                           ldata=ldata, last_buffer=last, payload=memoryview(payload), data_checksum=False)
    return memoryview(bytes(head) + payload + padding)


def feed(rx, wire, at=0.0):
    events, others = rx.accept(wire, len(wire), at)
    assert others == []
    return events


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


def test_reassembly_places_data_and_reports_buffer_events(rx):
    rx.post(1, 10)
    data = os.urandom(950)
    out = []
    for p in reversed(range(10)):  # reordered: LDATA first
        chunk = data[p * PS:(p + 1) * PS]
        out += feed(rx, datagram(1, p, chunk, ldata=p == 9))
    # Reversed, the first pass is timed by the LDATA alone (the highest, and first to arrive); the
    # other nine came after it, lower, but before anything was asked for: reordered, not lost.
    first_pass = ev.FirstPass(spread=0.0, arrivals=1, lost=0)
    assert out == [ev.FirstPacket(1, False), ev.LdataSeen(1, 10), ev.BufferComplete(1, 950, first_pass)]
    assert bytes(rx.take(1)) == data


def test_a_buffers_first_pass_is_timed_with_everything_that_arrived_meanwhile(rx):
    """What the rate selector is told: packets 0-9 in order, 3 lost and asked for again,
    another buffer's packet in between; the first pass ends when the missing are asked for."""
    rx.post(1, 10)
    rx.post(2, 10)
    data = os.urandom(950)
    at = iter(range(100))
    out = []
    for p in [0, 1, 2, 4, 5, 6, 7, 8, 9]:
        chunk = data[p * PS:(p + 1) * PS]
        out += feed(rx, datagram(1, p, chunk, ldata=p == 9), next(at) / 1000)
        if p == 4:
            feed(rx, datagram(2, 0, data[:PS]), next(at) / 1000)
    assert rx.missing(1) == (3,)
    out += feed(rx, datagram(1, 3, data[3 * PS:4 * PS]), 1.0)  # the resend, much later
    (complete,) = [e for e in out if isinstance(e, ev.BufferComplete)]
    assert complete.first_pass == ev.FirstPass(spread=0.009, arrivals=10, lost=1)


def test_missing_list_is_exactly_what_was_withheld(rx):
    rx.post(1, 10)
    withheld = {0, 3, 4, 8}
    for p in set(range(10)) - withheld:
        feed(rx, datagram(1, p, bytes(PS), ldata=p == 9))
    assert rx.missing(1) == tuple(sorted(withheld))


def test_missing_list_without_ldata_covers_the_capacity(rx):
    rx.post(1, 10)
    feed(rx, datagram(1, 2, bytes(PS)))
    assert rx.missing(1) == (0, 1, 3, 4, 5, 6, 7, 8, 9)


@pytest.mark.parametrize("bad, reason", [
    (datagram(2, 0, bytes(PS)), "unknown buffer"),
    (datagram(1, 10, bytes(PS)), "outside buffer"),
    (datagram(1, 9, bytes(PS + 1), ldata=True), "outside buffer"),
    (datagram(1, 10, b"", ldata=True), "outside buffer"),  # ends at the slot's end, numbered past it
    (datagram(1, 3, bytes(PS - 1)), "data length"),
    (datagram(1, 3, bytes(PS))[:20], "truncated"),
    (memoryview(bytes(datagram(1, 3, bytes(PS)))[:2] + b"\x05" + bytes(datagram(1, 3, bytes(PS)))[3:]), "version"),
    (datagram(1, 3, bytes(PS))[:-1], "length"),
    (memoryview(bytes(datagram(1, 3, bytes(PS)))[:12] + b"\xff" + bytes(datagram(1, 3, bytes(PS)))[13:]), "checksum"),
])
def test_hostile_data_is_counted_and_dropped(rx, bad, reason):
    rx.post(1, 10)
    assert feed(rx, bad) == []
    assert rx.dropped[reason] == 1
    assert rx.missing(1) == tuple(range(10))


def test_data_for_other_ports_is_dropped(rx):
    rx.post(1, 10)
    head = bytearray(24)
    build_header(head, local_port=1, foreign_port=3, buffer=1, packet=0, high_ack=0, ldata=False,
                 last_buffer=False, payload=memoryview(bytes(PS)), data_checksum=False)
    assert feed(rx, memoryview(bytes(head) + bytes(PS))) == [] and rx.dropped == {"ports": 1}


def test_packets_past_the_ldata_and_a_second_ldata_are_dropped(rx):
    rx.post(1, 10)
    feed(rx, datagram(1, 4, bytes(50), ldata=True))
    feed(rx, datagram(1, 5, bytes(PS)))
    feed(rx, datagram(1, 3, bytes(20), ldata=True))
    assert rx.dropped["past ldata"] == 2
    assert rx.missing(1) == (0, 1, 2, 3)


def test_datagrams_that_are_not_data_are_handed_back():
    """A batch the kernel coalesced: the DATA is placed, the rest is located for the control path."""
    for impl in IMPLEMENTATIONS:
        rx = impl(PS, BS, 2, 1, False)
        rx.post(1, 10)
        control = encode(Refused("no"), 1, 2)
        control += bytes(len(datagram(1, 0, bytes(PS))) - len(control))
        batch = bytes(datagram(1, 0, bytes(PS))) + control + bytes(datagram(1, 1, bytes(PS)))
        events, others = rx.accept(memoryview(batch), len(control), 0.0)
        assert others == [(len(control), 2 * len(control))] and rx.missing(1) == tuple(range(2, 10))
        assert events == [ev.FirstPacket(1, False)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 11) | st.integers(0, 70),
                          st.just(PS) | st.integers(0, 300), st.booleans(), st.booleans(), st.integers(0, 0xFFFF)),
                max_size=80),
       st.sets(st.integers(0, 70)))
def test_the_compiled_and_python_slots_agree_on_anything(packets, damaged):
    """Random and hostile packets (unknown buffers, packet numbers past the slot, any length,
    stray LDATAs, damaged bytes) go to both implementations: the same events, counts,
    missing lists and data; and no completed buffer is ever larger than a slot."""
    if not fastpath:
        pytest.skip("the compiled fast path is not built")
    both = [impl(PS, BS, 2, 1, False) for impl in (PythonSlots, fastpath.Slots)]
    for rx in both:
        rx.post(1, 10)
        rx.post(2, 10)
    placed, asked = [[], []], [[], []]
    for i, (buffer, packet, length, ldata, last, high_ack) in enumerate(packets):
        wire = bytearray(datagram(buffer, packet, bytes([i % 251 + 1]) * length, ldata, last, high_ack))
        if i in damaged:
            wire[(i * 7) % len(wire)] ^= 1 << (i % 8)
        for k, rx in enumerate(both):
            placed[k].append(rx.accept(memoryview(bytes(wire)), len(wire), i / 1000))
            if i % 5 == 4:
                asked[k].append(rx.missing(1 + i % 2))
    assert placed[0] == placed[1] and asked[0] == asked[1]
    state = [(dict(rx.dropped), rx.seen, rx.accepted, rx.duplicates, rx.highest_posted, rx.high_ack, rx.last_at)
             for rx in both]
    assert state[0] == state[1]
    completed = {e.buffer for events, _ in placed[0] for e in events if isinstance(e, ev.BufferComplete)}
    for number in (1, 2):
        assert both[0].missing(number) == both[1].missing(number)
        if number in completed:
            assert bytes(both[0].take(number)) == bytes(both[1].take(number))
            assert len(both[0].take(number)) <= BS


def drain(tx, limit=64):
    """Every packet the queue gives, as (buffer, packet, ldata, last_buffer)."""
    out = []
    while (run := tx.pop_run(limit)) is not None:
        count = max(1, -(-len(run.data) // PS))
        out += [(run.buffer, p, p == count - 1, run.last_buffer) for p in range(run.first, run.first + run.n)]
    return out


def test_priority_pipe_resends_lower_buffers_first_and_in_packet_order():
    tx = TransmitQueue(PS)
    tx.load(1, bytes(BS), last=False)
    tx.load(2, bytes(250), last=True)
    first = [(run.buffer, run.first, run.n) for run in iter(lambda: tx.pop_run(4), None)]
    assert first == [(1, 0, 4), (1, 4, 4), (1, 8, 2), (2, 0, 3)]
    tx.resend(2, (0,))
    tx.resend(1, (7, 2, 3))
    assert drain(tx, 64) == [(1, 2, False, False), (1, 3, False, False), (1, 7, False, False),
                             (2, 0, False, True)]
    assert tx.resent == 4


def test_a_resend_for_a_packet_not_yet_sent_adds_nothing():
    tx = TransmitQueue(PS)
    tx.load(1, bytes(BS), last=False)
    tx.pop_run(3)
    assert tx.resend(1, (1, 5, 9)) == 1 and tx.resend(1, (1,)) == 0
    assert drain(tx) == [(1, 1, False, False)] + [(1, p, p == 9, False) for p in range(3, 10)]


def test_resend_past_the_ldata_sends_the_ldata_and_unknown_buffers_nothing():
    tx = TransmitQueue(PS)
    tx.load(3, bytes(250), last=True)
    drain(tx)
    assert tx.resend(3, (5, 9, 2)) == 1  # 5 and 9 both mean "your LDATA"
    assert drain(tx) == [(3, 2, True, True)]
    assert tx.resend(4, (0,)) == 0


def test_empty_buffer_is_one_empty_ldata():
    tx = TransmitQueue(PS)
    tx.load(1, b"", last=True)
    assert drain(tx) == [(1, 0, True, True)]


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


def test_a_burst_left_unfinished_lapses_after_an_idle_spell():
    pacer = BurstPacer(100, 0.002)
    assert pacer.allowance(0.0) == 100
    pacer.sent(20)  # the data ran out mid-burst
    pacer.set_rate(1, 0.006)  # and the receiver slowed the sender meanwhile
    assert pacer.allowance(2.0) == 1 and pacer.next_burst == pytest.approx(2.006)


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
    now, out = 0.0, bytearray(1000)
    while not any(isinstance(e, ev.BufferComplete) for e in b.events):
        while (packed := a.next_datagrams(now, out, 8)) is not None:
            size, segment = packed
            assert size == 4 * segment or size < segment * 3  # at most one burst of 4, whole packets
            b.receive(memoryview(bytes(out[:size])), now, "a", segment)
        now += 0.001
    assert now == pytest.approx(0.003)  # 10 packets at 4 per ms: bursts at 0, 1, 2 ms
    assert bytes(b.take(1)) == data
    assert a.next_datagrams(now, out, 8) is None and a.take_events() == [ev.TransmitIdle()]


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


def test_late_copies_of_a_delivered_buffer_are_duplicates_not_drops(rx):
    rx.post(1, 10)
    rx.post(2, 10)
    rx.drop(1)  # delivered
    feed(rx, datagram(1, 3, bytes(PS)))
    feed(rx, datagram(7, 3, bytes(PS)))
    assert rx.duplicates == 1 and dict(rx.dropped) == {"unknown buffer": 1}


def test_the_compiled_fast_path_is_built():
    """make test builds driver/_fastpath.c; silently falling back to Python would cost line rate."""
    assert fastpath is not None and ReceiveBuffers.__mro__[1] is fastpath.Slots


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 300), st.integers(0, 2000), st.booleans(), st.booleans(), st.data())
def test_compiled_and_python_packing_agree(packet_size, length, data_checksum, last, draw):
    if not fastpath:
        pytest.skip("the compiled fast path is not built")
    from netblt.driver.framing import python_pack
    data = os.urandom(length)
    count = max(1, -(-length // packet_size))
    first = draw.draw(st.integers(0, count - 1))
    n = draw.draw(st.integers(1, count - first))
    outs = [bytearray(n * (packet_size + 27)), bytearray(n * (packet_size + 27))]
    args = (packet_size, first, n, 77, 0xBEEF, last, 5, 6, data_checksum)
    assert fastpath.pack(outs[0], data, *args) == python_pack(outs[1], data, *args)
    assert outs[0] == outs[1]
    size = len(datagram(1, 0, b"")) + min(packet_size, length - first * packet_size)
    head = parse_header(memoryview(outs[0])[:size + (-size % 4)], data_checksum)
    assert (head.buffer, head.packet, head.local_port, head.high_ack) == (77, first, 5, 0xBEEF)


def test_arrival_reports_flushed_packet_by_packet_still_time_the_gap():
    # The protocol core flushes a report before every timer, often after a single packet: the
    # inter-arrival time must come out all the same (data timers on a slow path need it).
    rx = ReceiveBuffers(PS, BS, 2, 1, False)
    rx.post(1, 10)
    gaps = []
    for p in range(6):
        rx.accept(datagram(1, p, bytes(PS)), PS + 24, 0.011 * p)
        gaps.append(rx.report(interval=0.0).mean_gap)
    assert gaps[0] == 0.0 and gaps[-1] == pytest.approx(0.011)


def test_the_wait_before_a_resend_is_not_timed_as_the_paths_gap():
    # 11 ms a packet, then the receiver's data timer runs out and asks again: the resent
    # packets come a second later. That second is the receiver's own wait; timed as the
    # path's gap it swelled the data timers (16 x the gap), each repair waiting longer than
    # the last (20% loss on a LAN: a 1.4 MB transfer unfinished after 10 minutes).
    core = DataPathCore(2, 1)
    core.configure(Params(BS, PS, 5, 55, max_buffers=2, data_checksum=False, death_timer=60), ("peer", 1))
    core.post_receive(1, 10)
    rx = core.rx
    for p in range(6):
        rx.accept(datagram(1, p, bytes(PS)), PS + 24, 0.011 * p)
        rx.report(interval=0.0)
    core.query_missing(1)
    for p in range(6, 10):
        rx.accept(datagram(1, p, bytes(PS)), PS + 24, 1.0 + 0.011 * (p - 6))
        gap = rx.report(interval=0.0).mean_gap
    assert gap == pytest.approx(0.011)


@pytest.mark.skipif(os.geteuid() != 0, reason="forcing a socket's receive buffer needs root")
def test_a_receiver_as_root_queues_more_than_the_systems_limit():
    """A receiver's socket holds RECEIVE_BUFFER of DATA past net.core.rmem_max (4 MiB
    here: at a gigabit a receiver that lost the CPU for 35 ms dropped the rest)."""
    from netblt.driver.transport import RECEIVE_BUFFER, Transport
    transport = Transport("udp", ("127.0.0.1", 0))
    try:
        granted = transport.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    finally:
        transport.close()
    assert granted >= 2 * RECEIVE_BUFFER  # Linux doubles it for its bookkeeping


def test_a_receiver_kept_from_running_times_datagrams_by_when_they_came():
    """A receiver that lost the CPU reads its backlog at once: the kernel's time of
    arrival, not the read's, goes to the rate the receiver measures (a busy receiving
    host read a 20 Mb/s bottleneck as 27 and offered more than it passes)."""
    import time

    from netblt.driver.transport import Transport
    receiver, sender = Transport("udp", ("127.0.0.1", 0)), Transport("udp", ("127.0.0.1", 0))
    try:
        to = receiver.sock.getsockname()[:2]
        sent = []
        for _ in range(2):
            sent.append(time.monotonic())
            sender.send([b"x" * 100], to)
            time.sleep(0.05)
        time.sleep(0.2)  # the receiver runs late
        buf = bytearray(1 << 16)
        came = []
        for _ in range(2):
            view, _, source = receiver.receive(buf)
            assert source is not None and bytes(view) == b"x" * 100
            came.append(receiver.arrival)
        read = time.monotonic()
    finally:
        receiver.close()
        sender.close()
    for at, arrived in zip(sent, came):
        assert arrived is not None and at - 0.005 <= arrived <= at + 0.02 < read - 0.2
    assert came[1] - came[0] == pytest.approx(sent[1] - sent[0], abs=0.02)


@pytest.mark.parametrize("kind", ["udp", pytest.param("ip", marks=pytest.mark.skipif(
    os.geteuid() != 0, reason="a raw IP socket needs root"))])
def test_closing_a_software_data_path_ends_its_receive_thread_waiting_on_the_socket(monkeypatch, kind):
    """Each file of a directory sent is a connection whose data path closes at its end: its
    receive thread used to wait out the socket's read timeout (50 ms a file at both ends, 200
    small files in 18.8 s). With the timeout made long, close still ends the thread, on
    UDP (coalescing) and natively on IP alike."""
    from netblt.driver import transport as transport_module
    from netblt.driver.software import SoftwareDataPath

    monkeypatch.setattr(transport_module, "WAIT", 30.0)
    transport = transport_module.Transport(kind, ("127.0.0.1", 0 if kind == "udp" else 2998))
    dp = SoftwareDataPath(transport)
    try:
        dp.close()
        assert not any(thread.is_alive() for thread in dp._threads)
    finally:
        transport.close()


def test_a_coalescing_socket_gives_back_each_datagram_of_a_segmented_send():
    """The model's link socket reads a host's segmented upload in one call
    (driver/transport.py ``datagrams``): each datagram as sent, the short last one too."""
    from netblt.driver.transport import coalesce, datagrams, segmented

    reader, writer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        reader.bind(("127.0.0.1", 0))
        if not coalesce(reader):
            pytest.skip("the kernel has no UDP receive coalescing")
        sent = [bytes([n]) * 1456 for n in range(5)] + [b"last"]
        writer.sendmsg([b"".join(sent)], segmented(1456), 0, reader.getsockname())
        writer.sendto(b"", reader.getsockname())
        reader.settimeout(5)
        taken: list[bytes] = []
        while len(taken) < len(sent) + 1:
            got, source = datagrams(reader)
            assert source[1] == writer.getsockname()[1]
            taken += got
        assert taken == sent + [b""]
    finally:
        reader.close()
        writer.close()


def test_segment_runs_take_equal_datagrams_a_shorter_last_and_leave_an_empty_one_alone():
    from netblt.driver.transport import GSO_MAX_BYTES, GSO_MAX_SEGMENTS, segment_runs

    assert list(segment_runs([1456] * 3 + [100, 1456])) == [(0, 4), (4, 5)]  # the shorter one ends its run
    assert list(segment_runs([100, 1456])) == [(0, 1), (1, 2)]  # a longer one starts its own
    assert list(segment_runs([1456, 0, 0])) == [(0, 1), (1, 2), (2, 3)]  # an empty one would vanish in a run
    assert list(segment_runs([8])) == [(0, 1)] and list(segment_runs([])) == []
    assert [end - start for start, end in segment_runs([1] * (GSO_MAX_SEGMENTS + 1))] == [GSO_MAX_SEGMENTS, 1]
    big = GSO_MAX_BYTES // 3
    assert list(segment_runs([big] * 4)) == [(0, 3), (3, 4)]
