"""The host's link client against the board's rules (tests/link_board.py), through loss,
duplication and reordering in virtual time."""

import os
import random
import socket
import time

import pytest
from link_board import LossyLink, LossyRelay, ServedBoard, board_model

from netblt.formats import host_link as F
from netblt.driver import link as link_module
from netblt.driver.link import BoardLink
from netblt.driver.link_client import RETRY_BACKOFF, LinkClient, LinkError
from netblt.driver.link_requests import Request
from netblt.driver.transport import segmented
from netblt.formats.boards import BUILDS
from netblt.formats.registers import (ADDRESS, COMMAND_WORD, ENGINE_REGISTERS, EVENT_WORD, LINK_REGISTERS, Command, Event,
                                     decode_snapshot)
from netblt.sim.model.host_link import HostLink

IMPAIRED = dict(loss=0.2, duplicate=0.1, reorder=0.2)
HOST = ("10.0.0.2", 40000)
"""Where LossyLink says the host is (virtual: nothing is sent)."""


def opened(board: HostLink, seed: int, **impairment) -> tuple[LinkClient, LossyLink]:
    client, link = LinkClient(retry=0.002), LossyLink(board, seed, **impairment)
    client.open()
    link.run(client, lambda: client.opened)
    return client, link


PORT = ADDRESS["LOCAL_PORT"]


def write_and_pop(i: int) -> bytes:
    """A register set to ``i``, then one pop of DOWNLOAD_DATA (a read that moves the
    board's download address on, so a repeated execution shows)."""
    return F.encode_operations([F.Operation(F.Opcode.WRITE, PORT, i),
                                F.Operation(F.Opcode.READ, ADDRESS["DOWNLOAD_DATA"])])


def popping_board(seed: int) -> tuple[HostLink, LinkClient, LossyLink]:
    board = board_model()
    board.engine.rx_memory[:800] = b"".join(n.to_bytes(4, "little") for n in range(1000, 1200))
    return board, *opened(board, seed, **IMPAIRED)


@pytest.mark.parametrize("seed", range(10))
def test_every_request_runs_exactly_once_in_order_through_a_bad_path(seed):
    board, client, link = popping_board(seed)
    requests = [client.submit(F.Type.REGISTERS, write_and_pop(i)) for i in range(100)]
    link.run(client, lambda: all(r.reply for r in requests))
    assert [i for i, _ in board.executed] == [r.id for r in requests]  # once each, in order
    popped = [F.decode_operations(r.reply[1])[1].value for r in requests]
    assert popped == list(range(1000, 1100))  # no pop lost or repeated
    assert board.engine.values[PORT] == 99
    assert client.replays > 0 and board.counts["LINK_REPLAYED"] > 0  # lost replies were asked for again


@pytest.mark.parametrize("seed", range(5))
def test_joined_operations_run_once_in_order_and_each_gets_its_own_reply(seed):
    """Register operations submitted with ``join`` share a request while it waits (as many
    as one holds); an upload between them ends the sharing, so the order holds."""
    board, client, link = popping_board(seed)
    parts = []
    for i in range(100):
        parts.append(client.submit(F.Type.REGISTERS, write_and_pop(i), join=True))
        if i == 50:
            client.submit(F.Type.UPLOAD, b"\0\0\0\1", 0)
    link.run(client, lambda: all(p.reply for p in parts))
    carriers = list(dict.fromkeys(p.request.id if hasattr(p, "request") else p.id for p in parts))
    assert carriers == [1, 2, 3, 4, 6, 7, 8, 9]  # 15 pairs fill a request: 15 + 15 + 15 + 6, the upload (5), 15 + 15 + 15 + 4
    assert [i for i, kind in board.executed if kind == F.Type.REGISTERS] == carriers
    assert [F.decode_operations(p.reply[1])[1].value for p in parts] == list(range(1000, 1100))
    assert [F.decode_operations(p.reply[1])[0].value for p in parts] == list(range(100))


@pytest.mark.parametrize("seed", range(3))
def test_a_lossy_link_narrows_the_window_and_a_clean_one_widens_it_again(seed):
    """The board runs requests in order only: a lost request costs every one sent behind
    it. Halving the window at each loss keeps the requests sent again under half of those
    sent through 10% loss (with all 32 in flight throughout, more than all of them); once
    the link is clean the window is whole again."""
    board = board_model()
    client, link = opened(board, seed, loss=0.1, duplicate=0.1)
    data = bytes(range(256)) * 128  # the simulation's two transmit slots, 23 uploads
    uploads = []
    for _ in range(20):
        uploads += [client.submit(*spec) for spec in F.upload_requests(0, data, 1500)]
        link.run(client, lambda: all(r.reply for r in uploads))
    assert client.resent < len(uploads) / 2, (client.resent, len(uploads))
    assert bytes(board.engine.tx_memory[:len(data)]) == data
    link.loss = link.duplicate = 0.0
    for _ in range(30):  # by one a window's worth of replies: some 500 from a window of 4
        uploads = [client.submit(*spec) for spec in F.upload_requests(0, data, 1500)]
        link.run(client, lambda: all(r.reply for r in uploads))
    assert client.window == F.WINDOW


@pytest.mark.parametrize("parts", [1, 3])
@pytest.mark.parametrize("seed", range(5))
def test_uploads_and_downloads_are_byte_exact_through_a_bad_path(seed, parts):
    """Each DOWNLOAD in ``parts`` reply datagrams (the last request's last part short): a
    request is answered once every part came, lost parts bring the whole reply again."""
    board = board_model()
    data = os.urandom(4 * 2000)
    board.engine.rx_memory[:len(data)] = data[::-1]
    client, link = opened(board, seed, **IMPAIRED)
    uploads = [client.submit(*request) for request in F.upload_requests(0, data, 1500)]
    downloads = [client.submit(*request) for request in F.download_requests(0, len(data), 1500, parts)]
    assert len(downloads) == -(-2000 // (parts * F.max_words(1500)))
    link.run(client, lambda: all(r.reply for r in uploads + downloads))
    assert bytes(board.engine.tx_memory[:len(data)]) == data
    assert b"".join(r.reply[1] for r in downloads) == data[::-1]
    assert sorted(i for i, kind in board.executed if kind == F.Type.UPLOAD) == [r.id for r in uploads]
    assert all(len(r.reply[1]) == 0 for r in uploads)  # acknowledged, not echoed
    assert [r.reply[0].value for r in downloads] == [r.value for r in downloads]


def test_a_download_in_parts_is_answered_only_when_every_part_came():
    """A part lost, or a stray datagram with the request's ID, does not answer it: only a
    replay of the parts does (the whole reply, from slot memory again)."""
    board = board_model()
    data = os.urandom(4 * 1000)
    board.engine.rx_memory[:len(data)] = data
    client, _ = opened(board, 0)
    (spec,) = F.download_requests(0, len(data), 1500, parts=3)
    request = client.submit(*spec)
    (sent,) = client.outgoing(1.0)
    replies = board.receive(sent, HOST, 1.0)
    assert len(replies) == 3 and F.decode(replies[0])[0].value == 0 and F.decode(replies[2])[0].value == 728
    stray = F.encode(F.decode(replies[1])[0]._replace(value=5), bytes(4 * F.max_words(1500)))
    for datagram in (replies[0], replies[0], stray, replies[2]):
        client.receive(datagram, 1.0)
    assert request.reply is None and request.id in client.in_flight
    replayed = board.receive(F.encode(F.Header(F.Type.RESEND, id=request.id, session=client.session)), HOST, 1.1)
    assert replayed == replies and board.counts["LINK_REPLAYED"] == 1
    for datagram in replayed:
        client.receive(datagram, 1.1)
    assert request.reply == (F.decode(replies[0])[0], data) and not client.in_flight


@pytest.mark.parametrize("seed", range(5))
def test_an_urgent_request_overtakes_the_uploads_still_waiting(seed):
    """A resend or a control packet submitted behind a buffer's uploads goes before those
    not yet sent (IDs are given as requests go out, so the board still runs every
    request once, in ID order), through a bad path; the uploads still land byte-exact."""
    board = board_model(BUILDS["versa_ecp5"]["block"])
    data = os.urandom(len(board.engine.tx_memory))  # 46 uploads
    client, link = opened(board, seed, **IMPAIRED)
    uploads = [client.submit(*request) for request in F.upload_requests(0, data, 1500)]
    link.run(client, lambda: uploads[0].reply is not None)  # the uploads are under way
    urgent = client.submit(F.Type.REGISTERS, write_and_pop(7), urgent=True)
    link.run(client, lambda: urgent.reply is not None)
    assert sum(r.reply is not None for r in uploads) <= 1 + 2 * F.WINDOW  # it waited for no more than were out
    link.run(client, lambda: all(r.reply for r in uploads))
    assert [i for i, _ in board.executed] == sorted(i for i, _ in board.executed)  # each once, in ID order
    assert len(board.executed) == len(uploads) + 1 and board.engine.values[PORT] == 7
    assert bytes(board.engine.tx_memory[:len(data)]) == data


def test_pushed_events_arrive_once_and_in_order_through_a_bad_path():
    """Every event and control packet the board holds goes in one push, as far as the
    push's room allows: through loss, duplication and reordering, each reaches the host
    once and in order, and far fewer pushes than packets carry them."""
    board = board_model()
    client, link = opened(board, 3, **IMPAIRED)
    sent = [[F.EVENT_BIT | n, F.EVENT_BIT | n + 1000] for n in range(50)]
    packets_sent = [F.ControlPacket(0x0A000001, 2998, b"control packet %d" % n + bytes(4 * n)) for n in range(50)]
    for events, packet in zip(sent, packets_sent):
        board.engine.events.extend(events)
        board.engine.control_in.append(packet)
    received: list[int] = []
    packets: list[F.ControlPacket] = []

    def all_in() -> bool:
        pushed = client.take_pushed()
        received.extend(pushed.events)
        packets.extend(pushed.packets)
        return len(packets) >= 50

    link.run(client, all_in)
    assert received == [e for events in sent for e in events] and packets == packets_sent
    pushes = board.counts["LINK_PUSHES"] - board.counts["LINK_PUSH_RETRIES"]
    assert pushes < 50 / 4, pushes


@pytest.mark.parametrize("mtu", [576, 1500, 9000])
def test_a_push_takes_control_packets_while_they_fit_the_link_and_the_first_whatever_its_size(mtu):
    """PUSH_LIMIT (the host link's MTU) bounds a push: packets join it in order while they
    fit; one larger than the room still goes, alone, so that none waits for ever."""
    board = board_model()
    client, link = opened(board, 6)
    board.settings["PUSH_LIMIT"] = F.push_limit(mtu)
    sizes = [40, 1400, 200, 1800, 60, 60, 1000]
    board.engine.control_in.extend(F.ControlPacket(0x0A000001, 2998, bytes([n]) * size) for n, size in enumerate(sizes))
    board.engine.events.extend(F.EVENT_BIT | n for n in range(300))
    pushes = []
    for _ in range(50):  # far more than it takes
        for datagram in board.pushes(link.now):
            header, body = F.decode(datagram)
            pushes.append(F.decode_events(body))
            assert len(datagram) <= max(mtu, F.IP_UDP_HEADERS + 4 * F.PUSH_LEAST) - F.IP_UDP_HEADERS or \
                len(pushes[-1][1]) == 1  # within the link's MTU, but for a packet larger alone
            board.receive(F.encode(F.Header(F.Type.ACK, session=client.session, ack=header.id)),
                          ("10.0.0.2", 40000), link.now)
    assert [p.packet[0] for push in pushes for p in push[1]] == list(range(len(sizes)))  # in order, once
    assert [e & 0xFFFF for push in pushes for e in push[0]] == list(range(300))
    assert len(pushes) < len(sizes) or mtu == 576


def test_a_board_that_was_reset_is_reported_not_resynchronised():
    board = board_model()
    client, link = opened(board, 1)
    board.reset()
    request = client.submit(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.READ, 1)]))
    with pytest.raises(LinkError, match="the board lost this session: it was reset or reloaded"):
        link.run(client, lambda: request.reply is not None)
    assert board.executed == []


def test_a_reply_the_board_no_longer_keeps_is_an_error_not_a_loop():
    """A request ran, its reply was lost, and the board has forgotten it: the host says so
    and stops, instead of asking for STATUS and the reply for ever."""
    board = board_model()
    client, link = opened(board, 1)
    receive = board.receive

    def forgetting(datagram, source, now):
        replies = receive(datagram, source, now)
        if F.decode(datagram)[0].type == F.Type.REGISTERS:
            board.stored.clear()
            return []
        return replies

    board.receive = forgetting
    request = client.submit(F.Type.REGISTERS, write_and_pop(0))
    with pytest.raises(LinkError, match="the reply to request 1 was lost and the board no longer keeps it"):
        link.run(client, lambda: request.reply is not None, limit=1.0)
    assert board.executed == [(1, F.Type.REGISTERS)]


def test_events_pushed_in_another_session_are_not_delivered():
    """A push is this host's only with its session number (a board taken over, or a
    forged push); the ID alone does not make it so."""
    client, _ = opened(board_model(), 1)
    body = F.encode_events([F.EVENT_BIT | 7], [F.ControlPacket(0x0A000001, 2998, b"forged")])
    for session in (client.session ^ 1, 0):
        client.receive(F.encode(F.Header(F.Type.EVENTS, id=client.held_push + 1, session=session), body), 1.0)
        pushed = client.take_pushed()
        assert pushed.events == [] and pushed.packets == []
    client.receive(F.encode(F.Header(F.Type.EVENTS, id=client.held_push + 1, session=client.session), body), 1.0)
    assert client.take_pushed().events == [F.EVENT_BIT | 7]


def test_a_board_that_never_answers_is_an_error_within_the_give_up_time():
    board = board_model()
    client = LinkClient(retry=0.01, give_up=1.0)
    client.open()
    link = LossyLink(board, 1, loss=1.0)
    with pytest.raises(LinkError, match="no answer for 1 s"):
        link.run(client, lambda: client.opened)
    assert 1.0 < link.now < 1.1


@pytest.mark.parametrize("bulk", [False, True], ids=["registers", "upload"])
def test_a_board_that_goes_away_mid_session_is_said_to_have_gone(bulk):
    """Nothing listening any more where the session was open (a simulated board stopped):
    "went away", not "no board at" as for a port that never had one."""
    board = ServedBoard(BUILDS["versa_ecp5"]["block"])
    link = BoardLink(("127.0.0.1", board.port), give_up=10)
    try:
        link.open()
        board.close()
        with pytest.raises(LinkError, match=f"board 127.0.0.1:{board.port} went away: nothing listens on its host"):
            for _ in range(10):  # the port's ICMP answers the datagram after the first
                if bulk:
                    link.upload(0, bytes(4096))
                else:
                    link.run(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.READ, ADDRESS["CYCLES"])]))
    finally:
        link.close()


def test_another_host_is_refused_until_the_owner_has_been_silent_long_enough():
    board = board_model()
    board.settings["TAKEOVER_AFTER"] = 5000
    owner, link = opened(board, 1)
    intruder = LinkClient(retry=0.002)
    intruder.open()
    with pytest.raises(LinkError, match=r"the board is in use by 10\.0\.0\.2:40000"):
        link.run(intruder, lambda: intruder.opened, source=("10.0.0.9", 5))
    # It tries requests anyway: with its own session, and with the owner's (a forgery).
    for session, message in ((intruder.session, "lost this session"), (owner.session, "another host owns")):
        forger = LinkClient(retry=0.002, session=session)
        forger.opening = forger.open()
        forger.opening.reply = (F.Header(F.Type.OPEN | F.REPLY), b"")  # skip OPEN, as a forger would
        request = forger.submit(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.WRITE, 1, 7)]))
        with pytest.raises(LinkError, match=message):
            link.run(forger, lambda: request.reply is not None, source=("10.0.0.9", 5))
    assert board.engine.values[PORT] == 0 and board.executed == []
    assert (board.counts["LINK_REFUSED"], board.counts["LINK_STALE"]) == (4, 1)  # three OPENs, one request; one stale
    taker = LinkClient(retry=0.002)
    taker.open(take_over=True)
    link.now += 6.0  # the owner has been silent
    link.run(taker, lambda: taker.opened, source=("10.0.0.9", 6))
    assert board.owner == ("10.0.0.9", 6)
    with pytest.raises(LinkError, match="lost this session"):
        stale = owner.submit(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.READ, 1)]))
        link.run(owner, lambda: stale.reply is not None)


def test_a_status_snapshot_needs_no_session_and_names_every_register():
    board = board_model()
    board.engine.values[ADDRESS["PEER_PORT"]] = 1998
    owner, link = opened(board, 2)
    stranger = LinkClient(retry=0.002)
    stranger.ask_status()
    LossyLink(board, 3, **IMPAIRED).run(stranger, lambda: stranger.snapshot is not None)
    snapshot = stranger.snapshot
    assert list(snapshot) == [r.name for r in ENGINE_REGISTERS + LINK_REGISTERS]
    assert snapshot["PEER_PORT"] == 1998 and snapshot["LINK_SESSION"] == owner.session
    assert board.executed == [] and not stranger.opened


def test_a_board_with_another_register_table_is_named_as_such():
    body = bytearray(board_model()._snapshot(0.0))
    body[0] ^= 1
    with pytest.raises(F.FormatError, match="register table is not this netblt's"):
        decode_snapshot(body)
    with pytest.raises(F.FormatError, match="malformed STATUS reply: 3 bytes"):
        decode_snapshot(body[:3])


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("seed", range(3))
def test_bulk_runs_are_exact_and_run_once_through_a_bad_path(seed, compiled, monkeypatch):
    """Uploads and downloads in the compiled bulk path (driver/_linkpath.c), or the Python
    requests where it is not built, through a relay that loses, duplicates and reorders:
    where a run stops, the client's recovery finishes it; the board runs every request
    once, in order, and the bytes are exact both ways. A download's register operations
    before it (``first``) run in its run, just before its data, and their reply comes back;
    so do an upload's after it (``then``: a SEND), and a register write queued alone
    before an upload goes first in its run; a run starts with requests still in flight."""
    if not compiled:
        monkeypatch.setattr(link_module, "linkpath", None)
    board = ServedBoard(BUILDS["versa_ecp5"]["block"])
    relay = LossyRelay(board.port, seed)
    link = BoardLink(("127.0.0.1", relay.port), give_up=10)
    link.client.timer.least = 0.005
    try:
        link.open()
        data = random.Random(seed).randbytes(len(board.engine.tx_memory) - 3)  # not whole words
        uploads = -(-len(data) // (4 * F.max_words(link.mtu)))
        for at in range(3):
            before = link.client.requests
            in_flight = link.client.submit(F.Type.REGISTERS, F.encode_operations([
                F.Operation(F.Opcode.WRITE, ADDRESS["ARG0"], at)]))
            link.flush()  # sent: the run goes on from its ID without waiting for its reply
            queued = link.client.submit(F.Type.REGISTERS, F.encode_operations([
                F.Operation(F.Opcode.WRITE, ADDRESS["HIGH_ACK"], at)]), urgent=True)
            then = Request(F.Type.REGISTERS, F.encode_operations([
                F.Operation(F.Opcode.WRITE, ADDRESS["PEER_PORT"], 5000 + at), F.Operation(F.Opcode.READ, ADDRESS["PEER_PORT"])]))
            link.upload(0, data, then)
            link.wait([in_flight])
            assert F.decode_operations(then.reply[1])[1].value == 5000 + at and queued.reply is not None
            assert [kind for _, kind in board.link.executed[before:]] == [
                F.Type.REGISTERS, F.Type.REGISTERS, *[F.Type.UPLOAD] * uploads, F.Type.REGISTERS]  # each once, in order
            board.engine.rx_memory[:len(data)] = board.engine.tx_memory[:len(data)][::-1]
            before = link.client.requests
            first = Request(F.Type.REGISTERS, F.encode_operations([
                F.Operation(F.Opcode.WRITE, ADDRESS["PEER_PORT"], 4000 + at), F.Operation(F.Opcode.READ, ADDRESS["PEER_PORT"])]))
            assert link.download(0, len(data), first=first) == bytes(board.engine.tx_memory[:len(data)][::-1])
            assert bytes(board.engine.tx_memory[:len(data)]) == data
            assert F.decode_operations(first.reply[1])[1].value == 4000 + at
            assert board.link.executed[before] == (before + 1, F.Type.REGISTERS)  # it ran first, once
        executed = [number for number, _ in board.link.executed]
        assert executed == list(range(1, len(executed) + 1)) == list(range(1, link.client.requests + 1))
        assert relay.counts["lost"] and link.client.replays + link.client.resent > 0  # recovery ran
    finally:
        link.close()
        relay.close()
        board.close()


@pytest.mark.parametrize("seed", range(4))
def test_an_upload_and_its_send_go_quiet_and_a_later_ack_answers_them(seed, monkeypatch):
    """A compiled upload run that fits the window, with a SEND after it and a register
    write queued before it (each writes only), goes out whole and QUIET: on a clean path
    (seed 0) the board replies to none of it, and a later datagram's ``ack`` (here a read's
    reply) answers it, the SEND and the write with the replies the board keeps for them,
    no STATUS needed. Through loss,
    duplication and reordering, what no ack answered is recovered: every request runs
    once, in order, and the bytes are exact."""
    board = ServedBoard(BUILDS["versa_ecp5"]["block"])
    replies: list[int] = []
    receive = board.link.receive

    def counted(*args):
        out = receive(*args)
        replies.extend(F.decode(datagram)[0].type for datagram in out)
        return out

    monkeypatch.setattr(board.link, "receive", counted)
    relay = LossyRelay(board.port, seed) if seed else None
    link = BoardLink(("127.0.0.1", relay.port if relay else board.port), give_up=10)
    link.client.timer.least = 0.005
    try:
        link.open()
        replies.clear()
        data = random.Random(seed).randbytes(8 * 4 * F.max_words(link.mtu) - 3)  # 8 uploads
        for at in range(8):
            before = link.client.requests
            queued = link.client.submit(F.Type.REGISTERS, F.encode_operations([
                F.Operation(F.Opcode.WRITE, ADDRESS["HIGH_ACK"], at)]), urgent=True)
            then = Request(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.WRITE, ADDRESS["PEER_PORT"], at)]))
            link.upload(0, data[at:], then)
            link.run(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.READ, ADDRESS["PEER_PORT"])]))
            link.wait(link.client.unanswered_requests())
            assert not link.client.unanswered and queued.reply is not None and then.reply is not None
            assert [kind for _, kind in board.link.executed[before:]] == [
                F.Type.REGISTERS, *[F.Type.UPLOAD] * 8, F.Type.REGISTERS, F.Type.REGISTERS]  # each once, in order
            for request in (queued, then):  # the reply the board keeps
                assert request.reply[1] == bytes(F.decode(board.link.stored[request.id][0])[1])
            assert bytes(board.engine.tx_memory[:len(data) - at]) == data[at:]
        if not seed:  # none of the runs' requests was answered by a reply, nor needed a STATUS
            assert replies == [F.Type.REGISTERS | F.REPLY] * 8, replies  # the reads' alone
        executed = [number for number, _ in board.link.executed]
        assert executed == list(range(1, len(executed) + 1)) == list(range(1, link.client.requests + 1))
    finally:
        link.close()
        relay and relay.close()
        board.close()


def test_a_run_starts_once_the_requests_queued_before_it_have_gone():
    """Register requests queued before a download (a receiving host's commands and control
    packets) go first and the compiled run starts as they have gone, their replies coming
    back to it: it waited for a datagram first, a round trip and a wake a buffer."""
    board = ServedBoard(BUILDS["versa_ecp5"]["block"])
    link = BoardLink(("127.0.0.1", board.port), give_up=10)
    data = random.Random(3).randbytes(8192)
    board.engine.rx_memory[:len(data)] = data
    try:
        link.open()
        queued = [link.client.submit(F.Type.REGISTERS, F.encode_operations([
            F.Operation(F.Opcode.WRITE, ADDRESS["ARG0"], n)])) for n in range(3)]
        steps: list[float | None] = []
        step = link.step
        link.step = lambda until: (steps.append(until), step(until))[1]  # type: ignore[method-assign]
        got = link.download(0, len(data))
        assert got == data and all(request.reply is not None for request in queued)
        assert steps == []
    finally:
        link.close()
        board.close()


@pytest.mark.parametrize("size", [20_000, 50_000], ids=["the run fits beside it", "the run waits for it"])
def test_a_run_goes_on_past_a_request_whose_reply_was_lost(size):
    """A compiled run starts with requests in flight (their replies come to it and go back
    to the client) where the whole run fits in the window beside them; one whose reply
    never came is recovered after the run, from the reply the board still keeps, and runs
    once. A longer run waits for it: past the window the board keeps no reply to recover."""
    board = ServedBoard(BUILDS["versa_ecp5"]["block"])
    link = BoardLink(("127.0.0.1", board.port), give_up=10)
    link.client.timer.least = 0.005
    try:
        link.open()
        write = link.client.submit(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.WRITE, ADDRESS["ARG0"], 9)]))
        link.flush()
        link.sock.settimeout(2)
        assert F.decode(link.sock.recv(65536))[0].id == write.id  # its reply, lost on the way
        link.sock.setblocking(False)
        before = len(board.link.executed)
        data = random.Random(9).randbytes(size)  # 14 requests or 35, beside a window of 32
        link.upload(0, data)
        assert write.reply is None or write.reply[0].id == write.id
        link.wait([write])
        assert bytes(board.engine.tx_memory[:len(data)]) == data and board.link.executed[before - 1][1] == F.Type.REGISTERS
        assert [kind for _, kind in board.link.executed[before:]] == [F.Type.UPLOAD] * -(-len(data) // (4 * F.max_words(1500)))
        assert link.client.replays + link.client.resent >= 1
    finally:
        link.close()
        board.close()


def test_a_window_of_jumbo_downloads_fits_the_hosts_socket():
    """32 DOWNLOAD replies of 9000 bytes arrive at once: 290 KB, more than a socket's
    default 208 KiB of buffer holds. The link asks for more, and fits its window to what
    the kernel grants; with the default buffer and the whole window, replies were dropped
    at every run and each recovery asked for them all again (a receive through a board
    stalled for good)."""
    board = ServedBoard(BUILDS["versa_ecp5"]["dram"])
    link = BoardLink(("127.0.0.1", board.port), give_up=10, mtu=9000)
    try:
        link.open()
        size = 64 * 4 * F.max_words(9000)
        board.engine.rx_memory[:size] = data = random.Random(3).randbytes(size)
        for at in range(4):
            first = Request(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.READ, ADDRESS["CYCLES"])]))
            assert link.download(0, size, first=first) == data
            assert first.reply[0].type == F.Type.REGISTERS | F.REPLY and len(first.reply[1]) == F.OPERATION.end
        assert link.parts > 1  # several replies a DOWNLOAD, and the window's replies still fit
        assert link.client.window * link.parts * (9000 + 1024) * 2 <= link.sock.getsockopt(socket.SOL_SOCKET,
                                                                                            socket.SO_RCVBUF)
        assert link.client.replays + link.client.resent == 0  # nothing was dropped on the way
    finally:
        link.close()
        board.close()


def test_an_upload_run_asks_for_one_reply_in_several():
    """The compiled run sets QUIET on an upload's requests but one in half a window and
    each batch's last: the board runs them all, in order, and a sixteenth as many small
    replies cross the link; a reply says the quiet ones before it ran. A register write
    queued before it and the SEND after it go in the run: no reply reaches Python."""
    board = ServedBoard(BUILDS["versa_ecp5"]["block"], mtu=1500)
    link = BoardLink(("127.0.0.1", board.port), give_up=10)
    try:
        link.open()
        data = random.Random(5).randbytes(len(board.engine.tx_memory))
        link.client.submit(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.WRITE, ADDRESS["HIGH_ACK"], 7)]),
                           urgent=True)
        then = Request(F.Type.REGISTERS, F.encode_operations([F.Operation(F.Opcode.READ, ADDRESS["HIGH_ACK"])]))
        replies_before, executed_before, in_python = link.bytes_in, len(board.link.executed), link.client.received
        link.upload(0, data, then)
        requests = -(-len(data) // (4 * F.max_words(1500)))
        assert bytes(board.engine.tx_memory) == data and F.decode_operations(then.reply[1])[0].value == 7
        assert board.link.executed[executed_before:] == [
            (executed_before + 1 + n, kind) for n, kind in enumerate(
                [F.Type.REGISTERS, *[F.Type.UPLOAD] * requests, F.Type.REGISTERS])]
        assert link.client.received == in_python
        replies = (link.bytes_in - replies_before) // F.HEADER.end
        assert 2 <= replies <= requests // (F.WINDOW // 2) + 4, (replies, requests)
    finally:
        link.close()
        board.close()


def test_the_bulk_path_is_compiled_here():
    """make builds driver/_linkpath.c; without it the same runs go one Python step a datagram."""
    assert link_module.linkpath is not None


def test_a_long_missing_list_waits_for_room_and_reaches_the_host_whole():
    """A slot missing all its 1024 packets lists them all, though the event FIFO holds 512:
    as the gateware's scanner waits for room, the model's list waits in a backlog and
    reaches the host in order, MISSING_END last, nothing lost."""
    board = board_model()
    engine = board.engine
    write = lambda name, value: engine.write(ADDRESS[name], value, 0.0)
    write("PACKET_SIZE", 1448)
    write("ARG0", 7)
    write("COMMAND", COMMAND_WORD.pack(op=Command.POST, slot=1))
    write("ARG0", 1024)
    write("COMMAND", COMMAND_WORD.pack(op=Command.QUERY_MISSING, slot=1))
    client, link = opened(board, 2, **IMPAIRED)
    words: list[int] = []

    def all_in() -> bool:
        words.extend(client.take_pushed().events)
        return len(words) == 1025

    link.run(client, all_in)
    events = [EVENT_WORD.unpack(word) for word in words]
    assert [e["value"] for e in events] == [*range(1024), 1024]
    assert [e["kind"] for e in events] == [Event.MISSING] * 1024 + [Event.MISSING_END]
    assert engine.counts["EVENTS_LOST"] == 0


def test_the_retry_time_follows_the_measured_round_trip():
    """RFC 6298's estimator: the smoothed round trip plus four variations, never under the
    floor; each expiry in a row doubles it (to RETRY_BACKOFF times), the next round trip timed
    undoes that."""
    timer = LinkClient(retry=0.001).timer
    assert timer.timeout == 0.001  # nothing measured yet: the floor
    for _ in range(50):
        timer.sample(0.010)
    assert 0.010 <= timer.timeout < 0.011  # steady: the variation has decayed
    timer.sample(0.030)
    assert timer.timeout > 0.030  # a slow spell widens it at once
    base = timer.timeout
    timer.back_off()
    timer.back_off()
    assert timer.timeout == pytest.approx(4 * base)
    for _ in range(10):
        timer.back_off()
    assert timer.timeout == pytest.approx(RETRY_BACKOFF * base)
    timer.sample(0.0001)
    assert timer.timeout < 2 * base  # measured again: the backoff is gone
    for _ in range(50):
        timer.sample(0.0001)
    assert timer.timeout == 0.001


def test_a_board_slower_than_the_retry_floor_is_not_retried_into_a_storm():
    """A board that answers in 10 ms where the client's floor is 2 ms: the timer learns its
    round trip from the first replies, so 300 requests cost a handful of STATUS datagrams
    and nothing sent twice (a fixed 2 ms timer asked where the board was five times a
    round trip and sent every request in flight again each time)."""
    board = board_model()
    client, link = LinkClient(retry=0.002, give_up=5.0), LossyLink(board, 1, delay=0.005)
    client.open()
    link.run(client, lambda: client.opened)
    requests = []
    for i in range(300):
        requests.append(client.submit(F.Type.REGISTERS, write_and_pop(i)))
    link.run(client, lambda: all(r.reply for r in requests))
    assert [i for i, _ in board.executed] == [r.id for r in requests]
    assert client.resent == 0 and client.replays == 0
    assert board.counts["LINK_STALE"] == 0 and client.retry >= 0.010


def test_a_recovery_resends_no_more_than_the_window_and_narrows_it():
    """A window of requests the board never saw (lost): the recovery sends them again half
    a window at a time, and a retry that hears nothing sends only its STATUS (every request
    in flight went again at each retry, a storm where they could never arrive)."""
    board = board_model()
    client, link = opened(board, 4)
    requests = [client.submit(F.Type.REGISTERS, write_and_pop(i)) for i in range(32)]
    now = link.now
    assert len(client.outgoing(now)) == 32  # all lost
    for _ in range(3):  # the retries' STATUS lost too: one datagram each, the timer backing off
        now += client.retry
        client.timeout(now)
        assert [F.decode(d)[0].type for d in client.outgoing(now)] == [F.Type.STATUS]
    now += client.retry
    client.timeout(now)
    (status,) = client.outgoing(now)
    for reply in board.receive(status, ("10.0.0.2", 40000), now):
        client.receive(reply, now)
    again = client.outgoing(now)
    assert [F.decode(d)[0].id for d in again] == [r.id for r in requests[:16]]  # half the window
    link.now = now
    link.run(client, lambda: all(r.reply for r in requests))
    assert [i for i, _ in board.executed] == [r.id for r in requests]


@pytest.mark.parametrize("mtu", [1500, 9000])
def test_the_host_link_learns_the_largest_datagram_that_reaches_the_board(mtu):
    board = ServedBoard(BUILDS["versa_ecp5"]["dram"], mtu=mtu)
    link = BoardLink(("127.0.0.1", board.port), give_up=5)
    try:
        link.fit_mtu(None)
        assert link.mtu == mtu
        link.open()
        data = random.Random(mtu).randbytes(1 << 20)
        link.upload(0, data)
        assert bytes(board.engine.tx_memory[:len(data)]) == data
    finally:
        link.close()
        board.close()


@pytest.mark.parametrize("mtu, seed", [(1500, 1), (1500, 14), (9000, 28), (9000, 31)])
def test_the_largest_datagram_is_learnt_through_a_lossy_link_in_a_moment(mtu, seed):
    """15% of the datagrams lost each way, the first probe among them (each seed's first
    draw): the probes are sent again until the small one is answered, and the large ones
    are given their tries from its answer, timed by its own round trip. (The time to the
    first answer, twenty times over, once held the start for the whole give-up time, 10
    s, waiting for a jumbo probe a 1500-byte board never answers.)"""
    board = ServedBoard(BUILDS["versa_ecp5"]["dram"], mtu=mtu)
    relay = LossyRelay(board.port, seed, loss=0.15, duplicate=0.1, reorder=0.0)
    link = BoardLink(("127.0.0.1", relay.port), give_up=10)
    try:
        started = time.monotonic()
        link.fit_mtu(None)
        assert link.mtu == mtu and relay.counts["lost"] > 0
        assert time.monotonic() - started < 3.0  # a 30th of the give-up time would do here
    finally:
        link.close()
        relay.close()
        board.close()


def test_a_link_mtu_the_board_cannot_take_is_one_line_naming_both_at_once():
    board = ServedBoard(BUILDS["versa_ecp5"]["dram"], mtu=1500)
    link = BoardLink(("127.0.0.1", board.port), give_up=10)
    try:
        started = time.monotonic()
        with pytest.raises(LinkError, match=r"9000-byte datagrams do not reach it \(--link-mtu 9000\); "
                                            r"1500-byte ones do: give --link-mtu 1500"):
            link.fit_mtu(9000)
        # The bound (one line within 5 s): the probes take PROBE_TRIES x
        # PROBE_ROUND_TRIPS of the first answer's round trip, 0.3 s here, 1.06 s on CI's
        # slower machine; without the tries' bound it waits out the give-up time (10 s).
        assert time.monotonic() - started < 5.0
        assert board.served.counts["datagrams in over the 1500-byte MTU (dropped)"] <= 8
    finally:
        link.close()
        board.close()


def test_requests_too_large_for_the_path_end_in_seconds_not_a_storm():
    """Requests that never reach the board while its STATUS answers come back (a path that
    drops jumbo frames, the MTU not probed): the link gives up within its give-up time,
    saying so, having sent a few dozen datagrams (it once sent 45 GB in 593 s)."""
    board = ServedBoard(BUILDS["versa_ecp5"]["dram"], mtu=1500)
    link = BoardLink(("127.0.0.1", board.port), give_up=1.0, mtu=9000)
    link.client.timer.least = 0.001
    try:
        link.open()
        started = time.monotonic()
        with pytest.raises(LinkError, match=r"the board answers, but ran none of the \d+ requests sent to it in 1 s "
                                            r"\(the largest 9000 bytes"):
            link.upload(0, bytes(1 << 20))
        assert time.monotonic() - started < 1.5
        assert board.served.counts["datagrams in over the 1500-byte MTU (dropped)"] < 100
    finally:
        link.close()
        board.close()


def test_a_bulk_run_goes_on_compiled_after_a_recovery(monkeypatch):
    """A lossy link stops the compiled run at each loss; the client recovers what was in
    flight and the next run takes the rest of the slot. Replies reaching Python are a few
    per recovery, not one per request (the rest of a slot once went through the client)."""
    board = ServedBoard(BUILDS["versa_ecp5"]["dram"], mtu=1500)
    relay = LossyRelay(board.port, 7, loss=0.002, duplicate=0.0, reorder=0.0)
    link = BoardLink(("127.0.0.1", relay.port), give_up=10)
    taken = []
    receive = LinkClient.receive
    monkeypatch.setattr(LinkClient, "receive", lambda self, datagram, now: (taken.append(1), receive(self, datagram, now)))
    try:
        link.open()
        data = random.Random(8).randbytes(4 << 20)
        link.upload(0, data)
        assert bytes(board.engine.tx_memory[:len(data)]) == data
        requests = -(-len(data) // (4 * F.max_words(1500)))
        assert relay.counts["lost"] > 0
        assert len(taken) < requests / 10, (len(taken), requests, relay.counts)
    finally:
        link.close()
        relay.close()
        board.close()


def test_a_request_answered_while_it_waits_to_be_sent_again_is_not_sent_again():
    """A recovery found two requests the board had not run and queues them to go again, a
    window (here one) at a time; then the replies to both come after all (their first
    copies were only late): the one still waiting is not sent a second time."""
    client = LinkClient(retry=0.01)
    client.opening = Request(F.Type.OPEN, reply=(F.Header(F.Type.OPEN | F.REPLY), b""))
    client.window = client.most = 2.0
    a, b = (client.submit(F.Type.REGISTERS, write_and_pop(i)) for i in range(2))
    assert len(client.outgoing(0.0)) == 2
    client.timeout(client.retry)
    assert [F.decode(d)[0].type for d in client.outgoing(client.retry)] == [F.Type.STATUS]
    client.receive(F.encode(F.Header(F.Type.STATUS | F.REPLY, session=client.session, ack=a.id)), client.retry)
    assert [F.decode(d)[0].id for d in client.outgoing(client.retry)] == [a.id]  # the window is one now
    for request in (a, b):
        client.receive(F.encode(F.Header(F.Type.REGISTERS | F.REPLY, id=request.id, session=client.session),
                                request.body), client.retry)
    assert a.reply and b.reply and client.outgoing(client.retry) == []
    assert client.resent == 1


def test_datagrams_a_read_joined_are_taken_each_as_the_board_sent_it():
    """The link's socket coalesces (UDP_GRO): a board's replies of one size sent back to
    back (the model sends them in one segmented send) can come in one read, and each is
    taken as it was sent, by the Python path as by the compiled one."""
    board = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    board.bind(("127.0.0.1", 0))
    link = BoardLink(board.getsockname())
    try:
        link.sock.send(b"here")
        _, where = board.recvfrom(16)
        first, second, last = bytes(range(100)), bytes(reversed(range(100))), b"end"
        board.sendmsg([first + second + last], segmented(100), 0, where)
        came: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(came) < 3 and time.monotonic() < deadline:
            link.poller.poll(100)
            came += link._receive()
        assert came == [first, second, last]
        assert link.bytes_in == 203
    finally:
        link.close()
        board.close()
