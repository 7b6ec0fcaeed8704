"""The sans-IO protocol core, one packet type or timer at a time, in virtual time."""

from dataclasses import replace

import pytest

from netblt.protocol import events as ev
from netblt.protocol.connection import HELD, Connection, State
from netblt.protocol.control_fifo import ControlFifo
from netblt.protocol.endpoint import Endpoint, MemorySource
from netblt.protocol.packets import (
    Abort, Control, Done, Go, KeepAlive, NullAck, Ok, Open, Quit, QuitAck, Refused, Resend, Response,
)
from netblt.protocol.params import Params, Timing

PARAMS = Params(buffer_size=10_000, packet_size=1000, burst_size=5, burst_interval=10, max_buffers=2,
                data_checksum=False, death_timer=20)
TIMING = Timing()


def sent(actions, kind=None):
    packets = [a.packet for a in actions if isinstance(a, ev.Transmit)]
    return [p for p in packets if kind is None or isinstance(p, kind)]


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def finished(actions):
    (result,) = of(actions, ev.Finished)
    return result


def open_packet(**changes):
    base = dict(uid=77, buffer_size=PARAMS.buffer_size, packet_size=PARAMS.packet_size,
                burst_size=PARAMS.burst_size, burst_interval=PARAMS.burst_interval, death_timer=20,
                max_buffers=PARAMS.max_buffers, data_checksum=False, write_mode=True, transfer_size=25_000)
    return Open(**base | changes)


def opened(conn, packet, now=0.0, source=None, **admission):
    """Hand a passive end an OPEN; when it asks its client, admit it."""
    actions = conn.handle(ev.PacketReceived(packet, source), now)
    if of(actions, ev.Admit):
        actions += conn.admit(now, **admission)
    return actions


def receiver(now=0.0, params=PARAMS):
    conn = Connection(active=False, sender=False, params=params, timing=TIMING)
    return conn, opened(conn, open_packet(), now)


def sender(transfer_size=25_000, now=0.0, params=PARAMS):
    conn = Connection(active=True, sender=True, params=params, timing=TIMING, transfer_size=transfer_size, uid=5)
    (open_,) = sent(conn.connect(now))
    response = Response(**{**open_.__dict__, "death_timer": 20})
    actions = conn.handle(ev.PacketReceived(response), now)
    return conn, actions


def control(*messages):
    return ev.PacketReceived(Control(tuple(messages)))


# -- set-up -------------------------------------------------------------------------------


def test_open_is_retransmitted_with_backoff_then_gives_up():
    conn = Connection(active=True, sender=True, params=PARAMS, timing=TIMING, transfer_size=1)
    assert len(sent(conn.connect(0.0), Open)) == 1
    times, now = [], 0.0
    while not conn.finished:
        now = conn.deadline
        actions = conn.handle_timeout(now)
        times.append(now)
    # Gaps of at most a quarter of the death timer (20 s), which ends it.
    assert times == [0.5, 1.5, 3.5, 7.5, 12.5, 17.5, 20.0]
    assert finished(actions).reason == "no answer to OPEN in 20 s (7 tries)"


def test_open_is_retried_for_as_long_as_the_death_timer_on_a_long_path():
    # A round trip longer than the doublings (a slowed simulated board sees minutes):
    # the tries go on each quarter of the death timer (under control_max) until it ends.
    conn = Connection(active=True, sender=True, params=replace(PARAMS, death_timer=100), timing=TIMING,
                      transfer_size=1)
    conn.connect(0.0)
    times = []
    while conn.deadline is not None and conn.deadline < 80:
        times.append(conn.deadline)
        conn.handle_timeout(conn.deadline)
    assert times == [0.5, 1.5, 3.5, 7.5, 15.5, 31.5, 56.5]
    conn.handle(ev.PacketReceived(Response(**{**conn.setup.__dict__, "death_timer": 20})), 75.0)
    assert conn.state is State.ESTABLISHED and not conn.finished


def test_passive_end_answers_with_restricted_parameters_and_gos():
    mine = replace(PARAMS, packet_size=500, burst_interval=20, max_buffers=8, data_checksum=True)
    conn = Connection(active=False, sender=False, params=mine, timing=TIMING)
    actions = opened(conn, open_packet())
    (response,) = sent(actions, Response)
    assert response.uid == 77
    assert (response.packet_size, response.burst_interval, response.max_buffers, response.data_checksum) == (
        500, 20, 2, True)
    assert of(actions, ev.Established)[0].params.packet_size == 500
    assert [a.buffer for a in of(actions, ev.PostReceive)] == [1, 2]
    (ctrl,) = sent(actions, Control)
    assert ctrl.messages == (Go(1, 1), Go(2, 2))
    assert conn.state is State.ESTABLISHED


def test_wrong_mode_and_unusable_parameters_are_refused_and_the_end_keeps_listening():
    conn = Connection(active=False, sender=False, params=PARAMS, timing=TIMING)
    (refused,) = sent(conn.handle(ev.PacketReceived(open_packet(write_mode=False)), 0.0))
    assert isinstance(refused, Refused) and "does not send" in refused.reason
    (refused,) = sent(conn.handle(ev.PacketReceived(open_packet(burst_interval=0)), 0.0))
    assert isinstance(refused, Refused) and "burst interval 0" in refused.reason
    assert conn.state is State.LISTEN
    assert sent(opened(conn, open_packet()), Response)


def test_active_end_reports_refusal():
    conn = Connection(active=True, sender=True, params=PARAMS, timing=TIMING, transfer_size=1)
    conn.connect(0.0)
    result = finished(conn.handle(ev.PacketReceived(Refused("disk full")), 0.1))
    assert not result.ok and result.reason == "refused by peer: disk full"


def test_duplicate_open_gets_response_again_and_another_uid_is_told_the_port_pair_is_held():
    conn, _ = receiver()
    (again,) = sent(conn.handle(ev.PacketReceived(open_packet()), 0.1))
    assert isinstance(again, Response) and again.uid == 77
    (refused,) = sent(conn.handle(ev.PacketReceived(open_packet(uid=78)), 0.2))
    assert isinstance(refused, Refused) and refused.reason.startswith(HELD), refused
    assert "0x0000004d" in refused.reason and "after 10 s of silence" in refused.reason  # half of 20
    assert conn.state is State.ESTABLISHED


def test_a_restarted_senders_opens_never_feed_the_old_connection_and_replace_it_once_quiet():
    """A sender killed and started again opens with a new UID from the same port. Its tries
    do not keep the dead connection alive (they did, and a receiver gave up after 73 s
    instead of 30); once the old connection has been quiet for half its death timer (two
    of the sender's keepalive intervals) the next try ends it, telling nobody, so that the
    try after is served."""
    conn, _ = receiver()  # death timer 20 s
    conn.handle(ev.PacketReceived(KeepAlive()), 2.0)
    for now in (4.0, 7.0, 11.9):
        (refused,) = sent(conn.handle(ev.PacketReceived(open_packet(uid=78)), now))
        assert isinstance(refused, Refused) and not conn.finished
    assert conn.heard_at == 2.0
    actions = conn.handle(ev.PacketReceived(open_packet(uid=78)), 12.0)
    assert conn.replaced_by == ev.PacketReceived(open_packet(uid=78), None) and not sent(actions)
    assert finished(actions).reason == ("replaced: its peer opened connection 0x0000004e on the same port pair "
                                        "after 10 s of silence (it restarted)")


def test_an_opener_told_the_port_pair_is_held_keeps_trying_and_knows_why():
    conn = Connection(active=True, sender=True, params=PARAMS, timing=TIMING, transfer_size=25_000, uid=5)
    (open_,) = sent(conn.connect(0.0))
    why = f"{HELD} (0x0000004d, its peer heard 3 s ago); a new one replaces it after 10 s of silence"
    conn.handle(ev.PacketReceived(Refused(why)), 0.1)
    assert not conn.finished and conn.held_by == why
    assert sent(conn.handle_timeout(conn.deadline), Open)  # the open timer tries again
    conn.handle(ev.PacketReceived(Response(**{**open_.__dict__, "death_timer": 20})), 1.0)
    assert conn.state is State.ESTABLISHED


def test_response_that_widens_the_offer_is_aborted():
    conn = Connection(active=True, sender=True, params=PARAMS, timing=TIMING, transfer_size=1, uid=5)
    (open_,) = sent(conn.connect(0.0))
    wider = Response(**{**open_.__dict__, "max_buffers": 9})
    actions = conn.handle(ev.PacketReceived(wider), 0.1)
    assert isinstance(sent(actions)[0], Abort)
    assert "max_buffers 9 exceeds" in finished(actions).reason


def test_duplicate_response_is_ignored():
    conn, _ = sender()
    assert conn.handle(ev.PacketReceived(Response(**{**conn.setup.__dict__, "death_timer": 20})), 0.1) == []


def test_response_with_other_uid_while_opening_is_ignored():
    conn = Connection(active=True, sender=True, params=PARAMS, timing=TIMING, transfer_size=1, uid=5)
    (open_,) = sent(conn.connect(0.0))
    assert conn.handle(ev.PacketReceived(replace(Response(**open_.__dict__), uid=6)), 0.1) == []
    assert conn.state is State.OPEN_SENT


# -- who the peer is (issue 16) ---------------------------------------------------------------


def transmissions(actions):
    return [(a.packet, a.to) for a in actions if isinstance(a, ev.Transmit)]


def test_the_peer_is_the_source_of_the_accepted_open_and_strangers_change_nothing():
    conn = Connection(active=False, sender=False, params=PARAMS, timing=TIMING)
    actions = opened(conn, open_packet(), source="A")
    assert {to for _, to in transmissions(actions)} == {"A"} and conn.peer == "A"
    # A stranger's packets, forged to look like the peer's, arrive before any of A's.
    forged = [Control((Go(1, 9),)), NullAck(7, 1, 1000), KeepAlive(), Quit("x"), Abort("hijack"),
              Response(**open_packet().__dict__), Refused("go away")]
    for packet in forged:
        assert conn.handle(ev.PacketReceived(packet, "B"), 0.01) == []
    (refused,) = conn.handle(ev.PacketReceived(open_packet(uid=99), "B"), 0.02)
    assert isinstance(refused.packet, Refused) and refused.to == "B" and "busy" in refused.packet.reason
    assert conn.state is State.ESTABLISHED and conn.strangers == len(forged) + 1
    assert conn.heard_at == 0.0  # a stranger does not keep the connection alive
    # The peer's own traffic still works, and everything still goes to the peer.
    actions = conn.handle(ev.BufferComplete(1, 10_000), 0.1) + conn.handle(ev.BufferReleased(1), 0.1)
    assert transmissions(actions) and {to for _, to in transmissions(actions)} == {"A"}


def test_a_listener_acts_on_open_only():
    conn = Connection(active=False, sender=False, params=PARAMS, timing=TIMING)
    for packet in (Abort("die"), Quit("die"), Refused("no"), KeepAlive(), Control((Go(1, 1),))):
        assert conn.handle(ev.PacketReceived(packet, "B"), 0.0) == []
    assert conn.state is State.LISTEN and not conn.finished


def test_the_active_end_listens_only_to_where_it_opened():
    conn = Connection(active=True, sender=True, params=PARAMS, timing=TIMING, transfer_size=1, uid=5,
                      peer="R")
    (open_,) = sent(conn.connect(0.0))
    response = Response(**{**open_.__dict__, "death_timer": 20})
    assert conn.handle(ev.PacketReceived(response, "X"), 0.1) == []
    assert conn.handle(ev.PacketReceived(Refused("no"), "X"), 0.1) == []
    assert conn.state is State.OPEN_SENT
    assert of(conn.handle(ev.PacketReceived(response, "R"), 0.2), ev.Established)


def test_a_refused_admission_tells_the_opener_and_keeps_listening():
    conn = Connection(active=False, sender=False, params=PARAMS, timing=TIMING)
    (admit,) = of(conn.handle(ev.PacketReceived(open_packet(client_string=b"x"), "A"), 0.0), ev.Admit)
    assert (admit.client_string, admit.source, admit.uid, admit.params.packet_size) == (b"x", "A", 77, 1000)
    assert conn.handle(ev.PacketReceived(open_packet(), "A"), 0.0) == []  # the same OPEN, while deciding
    actions = conn.refuse("file exists", 0.0)
    assert transmissions(actions) == [(Refused("file exists"), "A")]
    assert conn.state is State.LISTEN and conn.peer is None
    assert sent(opened(conn, open_packet(uid=78), source="B"), Response)


def test_the_admitting_client_may_answer_with_its_own_client_string():
    conn = Connection(active=False, sender=False, params=PARAMS, timing=TIMING, client_string=b"mine")
    (response,) = sent(opened(conn, open_packet(), client_string=b"proof"), Response)
    assert response.client_string == b"proof"


# -- resumed transfers and streams ----------------------------------------------------------------


def test_a_resuming_receiver_oks_what_it_holds_and_gos_the_rest():
    conn = Connection(active=False, sender=False, params=replace(PARAMS, max_buffers=2), timing=TIMING)
    actions = opened(conn, open_packet(), held=frozenset({1, 2, 4}), last=5)
    assert [a.buffer for a in of(actions, ev.PostReceive)] == [3, 5]
    (ctrl,) = sent(actions, Control)
    assert [(type(m).__name__, m.buffer) for m in ctrl.messages] == [
        ("Ok", 1), ("Ok", 2), ("Go", 3), ("Ok", 4), ("Go", 5)]
    # Nothing past the known last buffer is ever posted.
    actions = conn.handle(ev.BufferComplete(3, 10_000), 0.1) + conn.handle(ev.BufferReleased(3), 0.1)
    assert not of(actions, ev.PostReceive)


def test_a_receiver_that_holds_everything_finishes_once_its_oks_are_acknowledged():
    conn = Connection(active=False, sender=False, params=PARAMS, timing=TIMING)
    actions = opened(conn, open_packet(), held=frozenset({1, 2, 3}), last=3)
    assert not of(actions, ev.PostReceive)
    actions = conn.handle(ev.PacketReceived(NullAck(3, 5, 10)), 0.1)
    assert sent(actions, Done) and finished(actions).ok


def test_a_sender_counts_an_ok_for_a_buffer_it_never_sent_as_held():
    conn, _ = sender(transfer_size=25_000)  # three buffers
    actions = conn.handle(control(Ok(1, 1, 5, 10, 50), Go(2, 2), Ok(3, 3, 5, 10, 50)), 0.1)
    assert of(actions, ev.ReleaseSendBuffer) == [ev.ReleaseSendBuffer(1, 0, sent=False),
                                                ev.ReleaseSendBuffer(3, 2, sent=False)]
    assert of(actions, ev.SendBuffer) == [ev.SendBuffer(2, 1, False)]
    actions = conn.handle(control(Ok(4, 2, 5, 10, 50)), 0.2)
    assert "dally" in conn.timers
    # An OK naming a buffer past the end means nothing.
    conn2, _ = sender(transfer_size=25_000)
    assert not of(conn2.handle(control(Ok(1, 9, 5, 10, 50)), 0.1), ev.ReleaseSendBuffer)


def test_a_stream_sender_learns_its_last_buffer_from_its_client():
    conn, _ = sender(transfer_size=None)
    actions = conn.handle(control(Go(1, 1), Go(2, 2)), 0.1)
    assert of(actions, ev.SendBuffer) == [ev.SendBuffer(1, 0, False), ev.SendBuffer(2, 1, False)]
    conn.handle(ev.LastBuffer(1), 0.1)  # buffer 2 was never loaded: the data ended in buffer 1
    conn.handle(control(Ok(3, 1, 5, 10, 50)), 0.2)
    assert "dally" in conn.timers
    assert not of(conn.handle(control(Go(4, 3)), 0.3), ev.SendBuffer)


# -- liveness -------------------------------------------------------------------------------


def test_death_timer_is_reset_by_packets_and_data_then_expires():
    conn, _ = receiver()
    conn.handle(ev.PacketReceived(KeepAlive()), 15.0)
    conn.handle(ev.Arrivals(last_at=30.0, mean_gap=0.001, high_ack=0), 30.0)
    now, actions = 30.0, []
    while not conn.finished:
        now = conn.deadline
        actions = conn.handle_timeout(now)
    assert now == pytest.approx(50.0)
    assert finished(actions).reason == "death timer expired: nothing heard from the peer for 20 s"
    assert not sent(actions)  # a dead peer is not told anything


def test_keepalive_every_quarter_of_the_peers_death_timer_when_idle():
    conn, actions = sender(transfer_size=1)
    # The sender has no data to send until a GO arrives: it keeps the receiver's death timer fed.
    actions = conn.handle_timeout(5.0)
    assert sent(actions) == [KeepAlive()]
    assert conn.deadline == pytest.approx(10.0)


def test_quit_is_retransmitted_until_quitack():
    conn, _ = sender()
    assert sent(conn.quit("operator stopped it", 1.0)) == [Quit("operator stopped it")]
    assert sent(conn.handle_timeout(1.5)) == [Quit("operator stopped it")]
    result = finished(conn.handle(ev.PacketReceived(QuitAck()), 1.6))
    assert result.reason == "quit: operator stopped it"


def test_quit_received_is_acknowledged_and_answered_again_during_the_dally():
    conn, _ = receiver()
    actions = conn.handle(ev.PacketReceived(Quit("sender disk failed")), 1.0)
    assert sent(actions) == [QuitAck()] and not conn.finished
    assert sent(conn.handle(ev.PacketReceived(Quit("sender disk failed")), 1.2)) == [QuitAck()]
    actions = conn.handle_timeout(conn.deadline)
    assert finished(actions).reason == "peer quit: sender disk failed"


def test_abort_received_closes_at_once():
    conn, _ = sender()
    assert finished(conn.handle(ev.PacketReceived(Abort("bad")), 1.0)).reason == "aborted by peer: bad"
    assert conn.handle(ev.PacketReceived(KeepAlive()), 2.0) == []


def test_abort_from_the_client_tells_the_peer():
    conn, _ = sender()
    actions = conn.abort("interrupted by the user", 1.0)
    assert sent(actions) == [Abort("interrupted by the user")] and not finished(actions).ok


def test_peer_unreachable_fails_the_connection():
    conn = Connection(active=True, sender=True, params=PARAMS, timing=TIMING, transfer_size=1)
    conn.connect(0.0)
    result = finished(conn.handle(ev.PeerUnreachable("port unreachable"), 0.01))
    assert result.reason == "peer unreachable: nothing is listening there (port unreachable)"


def test_peer_unreachable_mid_transfer_says_the_peer_stopped():
    conn, _ = sender()
    result = finished(conn.handle(ev.PeerUnreachable("port unreachable"), 0.01))
    assert result.reason == "peer unreachable mid-transfer (port unreachable): the peer's program stopped"


# -- data receiver ----------------------------------------------------------------------------


def test_control_packet_is_resent_whole_on_control_timer_with_backoff():
    conn, actions = receiver()
    (first,) = sent(actions, Control)
    t1 = conn.deadline
    assert t1 == pytest.approx(TIMING.control_initial)
    assert sent(conn.handle_timeout(t1), Control) == [first]
    assert conn.deadline == pytest.approx(t1 + 2 * TIMING.control_initial)


def test_the_control_timer_doubles_up_to_control_max_and_a_round_trip_undoes_that():
    timer = receiver()[0].role.rtt
    for _ in range(12):
        timer.back_off()
    assert timer.timeout == TIMING.control_max
    timer.sample(0.001)
    assert timer.timeout == pytest.approx(max(TIMING.control_min, 0.001 + 4 * 0.0005))


def test_high_ack_retires_messages_and_clears_the_control_timer():
    conn, _ = receiver()
    conn.handle(ev.Arrivals(0.05, 0.0, high_ack=1), 0.05)
    assert len(conn.role.fifo) == 1 and "control" in conn.timers
    conn.handle(ev.PacketReceived(NullAck(2, 5, 10)), 0.06)
    assert len(conn.role.fifo) == 0 and "control" not in conn.timers
    assert conn.role.rtt.smoothed == pytest.approx(0.875 * 0.05 + 0.125 * 0.06)  # two samples


def test_data_timer_asks_for_the_missing_packets_and_resends_them():
    conn, _ = receiver()
    conn.handle(ev.PacketReceived(NullAck(2, 5, 10)), 0.01)
    deadline = conn.timers._at[("data", 1)]
    # Loose timer: twice buffer 1's 10 packets at 5 per 10 ms, plus the variance.
    assert deadline == pytest.approx(0.01 + 2 * 10 * 0.002 + 0.04)
    actions = conn.handle_timeout(deadline)
    assert of(actions, ev.QueryMissing) == [ev.QueryMissing(1)]
    actions = conn.handle(ev.MissingPackets(1, (3, 9)), deadline)
    (ctrl,) = sent(actions, Control)
    assert ctrl.messages == (Resend(3, 1, (3, 9)),)
    assert conn.stats.data_timeouts == 1 and conn.stats.packets_lost == 2


def test_no_resend_merely_because_a_later_buffer_started_or_ldata_came_early():
    conn, _ = receiver()
    conn.handle(ev.PacketReceived(NullAck(2, 1, 100)), 0.0)
    assert conn.timers._at[("data", 1)] == pytest.approx(2 * 10 * 0.1 + 0.4)  # loose
    actions = conn.handle(ev.FirstPacket(2, last_buffer=False), 0.05)
    actions += conn.handle(ev.LdataSeen(1, 10), 0.05)
    assert not of(actions, ev.QueryMissing) and not sent(actions)
    # ...but buffer 1's timer is now tight: the variance, not the whole buffer.
    assert conn.timers._at[("data", 1)] == pytest.approx(0.05 + 0.4)


def test_before_the_first_ok_a_data_timer_waits_while_data_still_arrives():
    # The first timers assume the sender's pace; a slow path delivers far slower, and
    # asking for packets still on their way would have them sent twice.
    conn, _ = receiver()
    conn.handle(ev.PacketReceived(NullAck(2, 5, 10)), 0.0)
    conn.handle(ev.FirstPacket(1, last_buffer=False), 0.01)
    deadline = conn.timers._at[("data", 1)]
    conn.handle(ev.Arrivals(last_at=deadline - 0.001, mean_gap=0.0, high_ack=2), deadline)
    assert not of(conn.handle_timeout(deadline), ev.QueryMissing)
    paused = conn.timers._at[("data", 1)]
    assert paused > deadline
    assert ev.QueryMissing(1) in of(conn.handle_timeout(paused), ev.QueryMissing)  # DATA stopped


def test_after_the_first_ok_a_data_timer_asks_at_once_whatever_else_arrives():
    conn, _ = receiver()
    conn.handle(ev.PacketReceived(NullAck(2, 5, 10)), 0.0)
    conn.handle(ev.BufferComplete(1, 10_000), 0.05)
    conn.handle(ev.BufferReleased(1), 0.05)  # the OK goes out
    conn.handle(ev.FirstPacket(2, last_buffer=False), 0.06)
    deadline = conn.timers._at[("data", 2)]
    # Resends of other buffers still arriving say nothing about buffer 2's packets.
    conn.handle(ev.Arrivals(last_at=deadline - 0.001, mean_gap=0.002, high_ack=2), deadline)
    assert of(conn.handle_timeout(deadline), ev.QueryMissing) == [ev.QueryMissing(2)]


def test_complete_buffer_is_delivered_and_ok_travels_with_the_next_go():
    conn, _ = receiver()
    conn.handle(ev.PacketReceived(NullAck(2, 5, 10)), 0.0)
    actions = conn.handle(ev.BufferComplete(1, 10_000), 0.1)
    assert of(actions, ev.Deliver) == [ev.Deliver(1, 0, 10_000)] and not sent(actions)
    actions = conn.handle(ev.BufferReleased(1), 0.1)
    (ctrl,) = sent(actions, Control)
    assert [type(m) for m in ctrl.messages] == [Ok, Go]
    assert (ctrl.messages[0].buffer, ctrl.messages[1].buffer) == (1, 3)
    assert of(actions, ev.PostReceive) == [ev.PostReceive(3, 10)]


def test_ok_is_not_held_forever_by_a_slow_client():
    conn, _ = receiver()
    conn.handle(ev.BufferComplete(1, 10_000), 0.1)
    (ctrl,) = sent(conn.handle_timeout(0.1 + TIMING.ok_hold))
    assert isinstance(ctrl.messages[-1], Ok)


def test_receiver_finishes_after_the_last_buffer_is_acknowledged_and_sends_done():
    conn, _ = receiver()
    conn.handle(ev.PacketReceived(NullAck(2, 5, 10)), 0.0)
    actions = conn.handle(ev.FirstPacket(1, last_buffer=True), 0.01)
    assert of(actions, ev.DropReceive) == [ev.DropReceive(2)]
    conn.handle(ev.BufferComplete(1, 123), 0.02)
    actions = conn.handle(ev.BufferReleased(1), 0.02)
    assert not of(actions, ev.PostReceive) and not conn.finished
    actions = conn.handle(ev.PacketReceived(NullAck(3, 5, 10)), 0.03)
    assert sent(actions) == [Done()] and finished(actions).ok


def test_nullack_rates_are_used_for_data_timers():
    conn, _ = receiver()
    conn.handle(ev.PacketReceived(NullAck(2, 1, 100)), 0.0)
    assert conn.role.burst == (1, 100)
    assert conn.timers._at[("data", 1)] == pytest.approx(2 * 10 * 0.1 + 0.4)
    assert conn.timers._at[("data", 2)] == pytest.approx(2 * 20 * 0.1 + 0.4)


# -- data sender -------------------------------------------------------------------------------


def test_sender_sends_buffers_on_go_and_stamps_the_high_ack():
    conn, actions = sender()
    assert of(actions, ev.SetRate) == [ev.SetRate(5, 10)]
    actions = conn.handle(control(Go(1, 1), Go(2, 2)), 0.1)
    assert of(actions, ev.SendBuffer) == [ev.SendBuffer(1, 0, False), ev.SendBuffer(2, 1, False)]
    assert of(actions, ev.StampHighAck) == [ev.StampHighAck(2)]
    assert not sent(actions)  # data is flowing: DATA carries the high-ack


def test_sender_answers_with_nullack_when_idle_and_acts_once_per_message():
    conn, _ = sender()
    conn.handle(control(Go(1, 1)), 0.1)
    conn.handle(ev.TransmitIdle(), 0.2)
    actions = conn.handle(control(Go(1, 1), Resend(2, 1, (4, 7))), 0.3)
    assert of(actions, ev.ResendPackets) == [ev.ResendPackets(1, (4, 7))]
    assert sent(actions) == []  # busy resending
    conn.handle(ev.TransmitIdle(), 0.4)
    actions = conn.handle(control(Go(1, 1), Resend(2, 1, (4, 7))), 0.5)  # a repeat: nothing new
    assert not of(actions, ev.ResendPackets) and sent(actions) == [NullAck(2, 5, 10)]


def test_rate_offers_are_only_made_more_restrictive_and_reported_in_nullack():
    conn, _ = sender()
    conn.handle(control(Go(1, 1)), 0.1)
    actions = conn.handle(control(Ok(2, 1, burst_size=50, burst_interval=5, control_timer=100)), 0.2)
    assert sent(actions) == [NullAck(2, 5, 10)]  # more generous offer: keep our limits
    actions = conn.handle(control(Ok(3, 1, burst_size=3, burst_interval=20, control_timer=100)), 0.3)
    assert of(actions, ev.SetRate) == [ev.SetRate(3, 20)]
    assert sent(actions) == [NullAck(3, 3, 20)]


def test_go_past_the_last_buffer_is_acknowledged_and_ignored():
    conn, _ = sender(transfer_size=5_000)  # one buffer
    actions = conn.handle(control(Go(1, 1), Go(2, 2)), 0.1)
    assert of(actions, ev.SendBuffer) == [ev.SendBuffer(1, 0, True)]
    assert conn.role.high_ack == 2


def test_go_beyond_the_outstanding_limit_is_a_protocol_error():
    conn, _ = sender()
    actions = conn.handle(control(Go(1, 1), Go(2, 2), Go(3, 3)), 0.1)
    assert isinstance(sent(actions)[-1], Abort)
    assert "exceeds 2 outstanding" in finished(actions).reason


def test_out_of_order_messages_are_acted_on_but_hold_the_high_ack():
    conn, _ = sender()
    actions = conn.handle(control(Go(2, 2)), 0.1)  # the packet with seq 1 comes later
    assert of(actions, ev.SendBuffer) == [ev.SendBuffer(2, 1, False)] and conn.role.high_ack == 0
    actions = conn.handle(control(Go(1, 1)), 0.2)
    assert of(actions, ev.SendBuffer) == [ev.SendBuffer(1, 0, False)]
    assert conn.role.high_ack == 2


def test_sequence_numbers_wrap_modulo_2_16():
    conn, _ = sender(transfer_size=10**9, params=replace(PARAMS, max_buffers=1))
    conn.role.high_ack = 0xFFFE
    actions = conn.handle(control(Go(0xFFFF, 1)), 0.1)
    actions += conn.handle(control(Ok(0, 1, 5, 10, 50), Go(1, 2)), 0.2)
    assert [a.buffer for a in of(actions, ev.SendBuffer)] == [1, 2]
    assert conn.role.high_ack == 0x10001
    assert of(actions, ev.StampHighAck)[-1] == ev.StampHighAck(1)


def test_a_receivers_control_messages_wrap_modulo_2_16_on_the_wire():
    """The 65,536th control message of a transfer (32,768 buffers of GO and OK: 512 MiB in
    a board's 16 KiB slots) goes out with sequence number 0, as do those after it modulo
    2**16; the fifo keeps counting without bound, and acknowledges across the wrap."""
    fifo = ControlFifo(1400)
    fifo.next_seq = fifo.acked = 0xFFFE
    fifo.acked -= 1
    for buffer in range(5):
        fifo.go(buffer)
    assert [m.seq for m in fifo.packet(0.0).messages] == [0xFFFE, 0xFFFF, 0, 1, 2]
    retired, _ = fifo.acknowledge(1, 0.1)
    assert [m.buffer for m in retired] == [0, 1, 2, 3] and [m.seq for m in fifo.packet(0.2).messages] == [2]


def test_sender_dallies_after_the_last_ok_and_done_ends_it():
    conn, _ = sender(transfer_size=5_000)
    conn.handle(control(Go(1, 1)), 0.1)
    actions = conn.handle(control(Ok(2, 1, 5, 10, control_timer=300)), 0.5)
    assert sent(actions) == [NullAck(2, 5, 10)]
    assert conn.deadline == pytest.approx(0.5 + 8 * 0.3 + TIMING.dally_margin)
    # The NULL-ACK was lost: the receiver's control timer resends its OK; answer it again.
    assert sent(conn.handle(control(Ok(2, 1, 5, 10, 300)), 0.8)) == [NullAck(2, 5, 10)]
    result = finished(conn.handle(ev.PacketReceived(Done()), 0.9))
    assert result.ok and result.reason == "transfer complete"


def test_sender_dally_expires_into_success():
    conn, _ = sender(transfer_size=5_000)
    conn.handle(control(Go(1, 1)), 0.1)
    conn.handle(control(Ok(2, 1, 5, 10, control_timer=300)), 0.5)
    assert finished(conn.handle_timeout(conn.deadline)).ok


def test_a_sender_whose_every_buffer_is_acknowledged_succeeds_when_the_death_timer_ends_the_dally():
    """A slow receiver's control timer makes a dally longer than the death timer; with the
    DONE lost, the silence that follows ends the connection, and every OK is in: success."""
    conn, _ = sender(transfer_size=5_000)
    conn.handle(control(Go(1, 1)), 0.1)
    conn.handle(control(Ok(2, 1, 5, 10, control_timer=4000)), 0.5)  # dally 32 s, death timer 20 s
    actions = []
    while not of(actions, ev.Finished):  # keepalives, then the death timer: nothing more is heard
        at = conn.deadline
        actions = conn.handle_timeout(at)
    assert at == pytest.approx(0.5 + 20)
    result = finished(actions)
    assert result.ok and result.reason.startswith("transfer complete")


def test_empty_transfer_is_one_buffer():
    conn, _ = sender(transfer_size=0)
    actions = conn.handle(control(Go(1, 1)), 0.1)
    assert of(actions, ev.SendBuffer) == [ev.SendBuffer(1, 0, True)]


def test_a_sender_choosing_its_rate_starts_low_says_so_and_holds_gos_until_its_first_ok():
    params = replace(PARAMS, buffer_size=600_000, max_buffers=4, burst_size=40, burst_interval=1, auto_rate=True)
    conn, actions = sender(transfer_size=6_000_000, params=params)
    (start,) = of(actions, ev.SetRate)
    assert (start.burst_size, start.burst_interval) == (5, 1)  # an eighth of 40 per ms
    assert sent(actions, NullAck) == [NullAck(0, 5, 1)]  # the receiver hears the rate its data comes at
    actions = conn.handle(control(Go(1, 1), Go(2, 2), Go(3, 3), Go(4, 4)), 0.1)
    assert [a.buffer for a in of(actions, ev.SendBuffer)] == [1, 2]  # START_WINDOW before any OK
    actions = conn.handle(control(Ok(5, 1, 40, 1, 100)), 0.2)
    assert [a.buffer for a in of(actions, ev.SendBuffer)] == [3, 4]
    assert of(actions, ev.SetRate) == [ev.SetRate(40, 1)]  # the receiver's offer, up to the cap
    _, actions = sender(params=replace(params, buffer_size=10_000))
    assert of(actions, ev.SetRate) == [ev.SetRate(40, 1)]  # two buffers a queue holds go at the cap


def test_a_sender_choosing_its_rate_with_big_buffers_sends_the_first_in_a_fifth_of_a_second():
    params = replace(PARAMS, buffer_size=4_000_000, max_buffers=4, burst_size=40, burst_interval=1, auto_rate=True)
    _, actions = sender(transfer_size=40_000_000, params=params)
    assert of(actions, ev.SetRate) == [ev.SetRate(20, 1)]  # 4 MB in 0.2 s: 160 Mb/s, above an eighth of 320
    assert sent(actions, NullAck) == [NullAck(0, 20, 1)]
    _, actions = sender(transfer_size=40_000_000, params=replace(params, buffer_size=10_000_000))
    assert of(actions, ev.SetRate) == [ev.SetRate(40, 1)] and sent(actions, NullAck) == []  # faster than the cap


class Recorded:
    """A data path that records each call it is given."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args: self.calls.append((name, *args))


@pytest.mark.parametrize("stream", [False, True])
def test_a_sender_hands_its_first_buffer_over_while_the_open_is_out(stream):
    """A board uploads it meanwhile (load_ahead). A stream is not read ahead: its buffers
    are cut at the size the RESPONSE settles on, which may be smaller."""
    data = bytes(range(256)) * 100
    source = MemorySource(data)
    if stream:
        source.size = None
    conn = Connection(active=True, sender=True, params=PARAMS, timing=TIMING, transfer_size=len(data),
                      peer=("127.0.0.1", 5000))
    dp = Recorded()
    Endpoint(conn, dp, source=source).start(0.0)
    assert [call[0] for call in dp.calls] == ["transmit"] + ([] if stream else ["load_ahead"])
    if not stream:
        assert dp.calls[1][1] == 1 and bytes(dp.calls[1][2]) == data[:PARAMS.buffer_size]
