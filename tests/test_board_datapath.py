"""The board data path's parts through their own calls (the session, the transmit and
receive sides, over a register file), and the whole against the board's model."""

from __future__ import annotations

import random
import socket
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from link_board import ServedBoard
from register_link import NAMES, RegisterLink, session

from netblt.formats import host_link as F
from netblt.driver import board as board_module
from netblt.driver.board import BoardDataPath
from netblt.driver.link_client import Pushed
from netblt.driver.board_session import read, write
from netblt.driver.board_receive import ALIVE_EVERY, ReceiveSlots
from netblt.driver import board_transmit
from netblt.driver.board_transmit import SendingSlot
from netblt.driver.link_requests import Request
from netblt.formats.registers import (
    ADDRESS, EVENT_WORD, RECEIVED_FLAGS, Event,
)
from netblt.driver.framing import pack
from netblt.protocol import events as ev
from netblt.protocol.params import Params


def receive_side(link: RegisterLink) -> tuple[ReceiveSlots, list[ev.Event]]:
    events: list[ev.Event] = []
    side = ReceiveSlots(session(link), events, Counter())
    side.reset(stale_high_ack=0)
    side.configure(16384, 1448, 10 * 16384)
    return side, events


def flushed(stale: int, readings: list[int]) -> list[int]:
    """The high-acks that reach the protocol core when RX_HIGH_ACK reads ``readings`` in
    turn, the last connection having left it at ``stale``."""
    side, events = receive_side(RegisterLink())
    side.reset(stale)
    side.post(1, 12)
    for i, high_ack in enumerate(readings):
        side.note_high_ack(high_ack)
        side.arrivals([0], [5, 1000 * i, 100], 1000 * i, time.monotonic())
    return [e.high_ack for e in events if isinstance(e, ev.Arrivals)]


def test_the_last_connections_high_ack_acknowledges_nothing():
    """The board keeps RX_HIGH_ACK across connections: until this connection's DATA moves
    it, it says nothing, or the receiver would retire control messages never acknowledged."""
    assert flushed(7, [7, 7, 9, 7]) == [0, 0, 9, 7]
    assert flushed(0, [0, 3]) == [0, 3]


def test_arrivals_are_read_only_from_slots_whose_post_ran():
    """A slot whose POST the board has not run yet shows a previous buffer's status."""
    side, _ = receive_side(RegisterLink())
    side.post(1, 12)
    side.post(2, 12)
    side.slots[0].posted = [Request(F.Type.REGISTERS)]  # its POST's reply has not come
    receiving, reads = side.arrival_reads()
    assert receiving == [1]
    assert [op.value for op in reads if op.register == ADDRESS["STATUS_SLOT"]] == [1]


def test_flush_goes_ahead_of_queued_data():
    """A flush is the host's wait for the board's status before a timer fires. Its reads
    go before uploads and downloads queued (behind a 4 MiB upload, a RESEND reaching the
    host waited the whole upload: 50 ms of a simulated 100 ms path)."""
    board = ServedBoard()
    dp = BoardDataPath.open(("127.0.0.1", board.port), local_port=2998)
    asked = []
    submit = dp.session.submit
    dp.session.submit = lambda operations, urgent=False: asked.append(urgent) or submit(operations, urgent)
    try:
        dp.flush()
        assert asked == [True]  # one request, urgent
    finally:
        dp.close()
        board.close()


def test_a_control_packets_writes_go_quiet_unless_a_read_joins_them(monkeypatch):
    """A receiving host sends each CONTROL packet through the board as register writes,
    and through the model a packet of 32 messages is four requests: nobody waits for
    their replies, which cost a receiving host a tenth of its CPU. They go QUIET, the board
    answers none, and a later reply's ack answers them; a read that joins the last of them
    takes its QUIET off, as its value must come back."""
    board = ServedBoard()
    replies: list[int] = []
    receive = board.link.receive

    def counted(*args):
        out = receive(*args)
        replies.extend(F.decode(datagram)[0].type & ~F.REPLY for datagram in out)
        return out

    monkeypatch.setattr(board.link, "receive", counted)
    dp = BoardDataPath.open(("127.0.0.1", board.port), local_port=2998)
    try:
        # 119 words and a write: four full requests, the read after them alone; 100 words
        # and a write: the fourth request has room, and the read joins it.
        for words, requests in ((119, 5), (100, 4)):
            replies.clear()
            before = dp.link.client.requests
            dp.session.write_words("ARG0", random.Random(words).randbytes(4 * words), [write("ARG1", words)])
            value = dp.session.operations([read("ARG1")], wait=True, urgent=True)
            dp.link.wait(dp.link.client.unanswered_requests())
            assert value == [words] and not dp.link.client.unanswered
            assert dp.link.client.requests - before == requests
            assert [kind for _, kind in board.link.executed[-requests:]] == [F.Type.REGISTERS] * requests
            assert replies == [F.Type.REGISTERS], replies  # the read's request alone answered
    finally:
        dp.close()
        board.close()


def test_a_slot_asked_for_its_missing_packets_gives_neither_the_paths_gap_nor_a_first_pass():
    """Once a slot's missing packets were asked for, its mean gap and its arrival times
    hold the wait for them (a data timer and a round trip): as the path's gap it would
    lengthen the data timers that caused the wait, each repair waiting longer than the
    last, and as a first pass it would tell the rate selector the path is slow. Asked
    through the side's own call, as the protocol core asks."""
    link = RegisterLink(lambda name, value: {"SLOT_STATE": 0b101, "SLOT_RECEIVED": 12}.get(name))
    side, events = receive_side(link)
    side.post(1, 12)
    side.post(2, 12)
    side.arrivals([0, 1], [5, 90_000, 500, 5, 80_000, 700], 100_000, time.monotonic())
    side.query_missing(1)
    side.arrivals([0, 1], [5, 90_000, 500, 5, 80_000, 700], 100_000, time.monotonic())
    gaps = [e.mean_gap for e in events if isinstance(e, ev.Arrivals)]
    assert gaps == [pytest.approx(500 / 50e6), 0.0]
    complete = RECEIVED_FLAGS.pack(complete=1)
    for index in (0, 1):
        side.event(Event.RECEIVED, index, complete, 12)
    passes = {e.buffer: e.first_pass for e in events if isinstance(e, ev.BufferComplete)}
    assert passes[1] is None and passes[2] is not None
    assert link.reads("SLOT_FIRST_AT") == 1  # buffer 2's only


class LevellingBoard(RegisterLink):
    """A register file whose DRAM reads need levelling: DRAM_CSR reaches
    ``dram`` (test_dram_levelling's model), each access busy for ``busy_reads`` reads of
    DRAM_CSR_BUSY; an access started while busy is ignored, as the port ignores it."""

    def __init__(self, dram, busy_reads: int) -> None:
        from netblt.formats.registers import DRAM_PHY_WORD, ENGINE_STATE
        super().__init__(DRAM_PHY=DRAM_PHY_WORD.pack(**{**vars(dram.phy), "levelling": 1}),
                         STATE=ENGINE_STATE.pack(slots_ready=0), DRAM_CSR_DATA=0)
        self.dram, self.busy_reads, self.busy, self.ignored = dram, busy_reads, 0, 0

    def _run(self, operations: list[F.Operation]) -> bytes:
        out = []
        for op in operations:
            name = NAMES[op.register]
            if op.opcode == F.Opcode.READ and name == "DRAM_CSR_BUSY":
                out.append(F.Operation(op.opcode | F.DONE, op.register, int(self.busy > 0)))
                self.busy = max(0, self.busy - 1)
            elif op.opcode == F.Opcode.WRITE and name in ("DRAM_CSR_WRITE", "DRAM_CSR_READ"):
                if self.busy:
                    self.ignored += 1
                else:
                    address = self.registers["DRAM_CSR_ADDRESS"]
                    if name == "DRAM_CSR_WRITE":
                        self.dram.write(address, op.value)
                    else:
                        self.registers["DRAM_CSR_DATA"] = self.dram.read(address)
                    self.busy = self.busy_reads
                out.append(F.Operation(op.opcode | F.DONE, op.register, op.value))
            else:
                out.append(F.decode_operations(super()._run([op]))[0])
        return F.encode_operations(out)


def test_a_board_whose_dram_reads_need_levelling_is_levelled_and_handed_over():
    """Opening a board whose DRAM is not ready and needs levelling: every DRAM_CSR access
    waited for (none ignored, though each stays busy past the reads that follow it), the
    levels left in DRAM_LEVELS for board status, and the DRAM handed to the controller."""
    from test_dram_levelling import VERSA, ModelDram

    from netblt.formats.dram_csr import DFII_CONTROL
    from netblt.host.board_status import slots

    dram = ModelDram(VERSA, [(3, range(1, 6)), (0, range(4, 8))])
    dram.registers[0] = DFII_CONTROL.pack(cke=1, odt=1, reset_n=1)  # software control, as the init leaves it
    board = LevellingBoard(dram, busy_reads=6)
    notices = []
    session(board, notices.append).ready_dram()
    assert board.ignored == 0 and dram.bitslip == [3, 0] and dram.delay == [3, 5]
    assert DFII_CONTROL.unpack(dram.registers[0])["sel"] == 1
    assert notices == ["levelling the board's DRAM reads (once after power-up: a few seconds)"]
    shown = {**board.registers, "STATE": 0b100, "GEOMETRY": 0, "SLOT_BYTES": 4 << 20}
    assert slots(shown).endswith("in DRAM with its reads levelled (byte 0: bitslip 3, delay 3, "
                                 "byte 1: bitslip 0, delay 5)")


def test_a_board_whose_dram_reads_land_nowhere_is_one_clear_error():
    from test_dram_levelling import VERSA, ModelDram

    from netblt.formats.dram_csr import DFII_CONTROL
    from netblt.driver.link_client import LinkError

    dram = ModelDram(VERSA, [(1, range(2, 5)), (2, range(0))])
    dram.registers[0] = DFII_CONTROL.pack(cke=1, odt=1, reset_n=1)
    board = LevellingBoard(dram, busy_reads=1)
    with pytest.raises(LinkError, match="^the board's DRAM: DRAM module 1: no bitslip and delay reads its "
                                        "pattern back; its slots cannot be used$"):
        session(board).ready_dram()


def test_a_board_left_with_events_pending_opens_cleanly():
    """A previous host left the board mid-transfer: what the board pushes to the next
    owner as it opens (a slot sent, a packet received, a missing list, a control packet)
    belongs to no slot of this host's; it opens, and counts them as dropped (the board
    pushes them during its first register reads, which once met a half-built driver)."""
    board = ServedBoard()
    board.engine.control_in.append(F.ControlPacket(0x7F000001, 9, b"a control packet of the last connection"))
    board.engine.events.extend([EVENT_WORD.pack(valid=1, kind=Event.SENT, slot=1),
                                EVENT_WORD.pack(valid=1, kind=Event.RECEIVED, slot=0,
                                                flags=RECEIVED_FLAGS.pack(first=1, complete=1), value=3),
                                EVENT_WORD.pack(valid=1, kind=Event.MISSING_END, slot=1)])
    try:
        dp = BoardDataPath.open(("127.0.0.1", board.port), local_port=2998)
        dp.close()
    finally:
        board.close()
    assert dp.sending.slots == {} and dp.receiving.slots == {} and dp.events == []
    assert dp.dropped["board events for a released slot"] == 1
    assert dp.dropped["board missing-packet lists never asked for"] == 1


@contextmanager
def receiving(transfer_size: int) -> Iterator[tuple[ServedBoard, BoardDataPath, Params, socket.socket]]:
    """A served board's data path receiving ``transfer_size`` bytes in 16 KiB buffers from a
    peer's socket on loopback (a port of its own: a fixed one may be taken), buffer 1
    posted; closed after the block."""
    board = ServedBoard()
    dp = BoardDataPath.open(("127.0.0.1", board.port), local_port=2998)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        peer.bind(("127.0.0.1", 0))
        params = Params(buffer_size=16384, packet_size=1448, burst_size=1, burst_interval=1, max_buffers=2,
                        data_checksum=False, death_timer=30)
        dp.configure(params, peer.getsockname(), transfer_size=transfer_size)
        dp.post_receive(1, params.packets_per_buffer)
        dp.wait_events(0.5)
        yield board, dp, params, peer
    finally:
        peer.close()
        dp.close()
        board.close()


def test_a_completion_whose_event_was_lost_is_recovered_from_the_slots_state():
    """A full event FIFO loses RECEIVED events (EVENTS_LOST): a slot completes and its host
    never hears. Its next missing-packet query lists nothing; the host then reads the
    slot's state, finds it whole, downloads it and delivers it, and counts the recovery."""
    with receiving(transfer_size=20000) as (board, dp, params, peer):
        data = random.Random(4).randbytes(16384)
        out = bytearray(2000)
        engine, event = board.engine, board.engine._event
        # The FIFO is full as the slot completes: its RECEIVED events are lost.
        engine._event = lambda kind, *args: None if kind == Event.RECEIVED else event(kind, *args)
        their_port = engine.value("PEER_PORT")  # the peer's NETBLT port, as set-up gave it
        for number in range(params.packets_per_buffer):
            written, _ = pack(out, data, 1448, number, 1, 1, 0, False, their_port, 2998, False)
            peer.sendto(out[:written], ("127.0.0.1", board.netblt_port))
        deadline = time.monotonic() + 5
        while engine.rx[0].received < params.packets_per_buffer and time.monotonic() < deadline:
            time.sleep(0.01)
        engine._event = event
        lost = engine.rx[0].complete
        assert lost and dp.wait_events(0.3) == []
        dp.query_missing(1)
        events = dp.wait_events(2.0) + dp.wait_events(0.2)
        complete = [e for e in events if isinstance(e, ev.BufferComplete)]
        assert [(e.buffer, e.size) for e in complete] == [(1, 16384)]
        assert bytes(dp.take(1)) == data
        assert dp.dropped["board completions recovered from a slot's state (its event lost)"] == 1


def test_a_late_completion_event_does_not_deliver_the_next_buffer_of_its_slot():
    """A query's answer finds slot 0 whole before its RECEIVED event comes; the protocol core
    takes buffer 1 and posts buffer 2 into slot 0; then the late event arrives. It was
    taken for buffer 2's completion, and buffer 2's half-filled slot was delivered (a
    SHA-256 mismatch through the Versa's DRAM in CI): now the slot's state, read in the
    download's run, says it is not whole, and the event is counted and dropped."""
    with receiving(transfer_size=40000) as (board, dp, params, peer):
        engine, event = board.engine, board.engine._event
        held: list[tuple] = []
        engine._event = lambda kind, *args: held.append((kind, *args)) if kind == Event.RECEIVED else event(kind, *args)
        their_port = engine.value("PEER_PORT")
        out = bytearray(2000)
        first = random.Random(5).randbytes(16384)

        def arrive(buffer: int, data: bytes, packets: range) -> None:
            for number in packets:
                written, _ = pack(out, data, 1448, number, 1, buffer, 0, False, their_port, 2998, False)
                peer.sendto(out[:written], ("127.0.0.1", board.netblt_port))
            deadline = time.monotonic() + 5
            while engine.rx[0].received < len(packets) and time.monotonic() < deadline:
                time.sleep(0.01)

        arrive(1, first, range(params.packets_per_buffer))
        dp.query_missing(1)
        delivered = [e for e in dp.wait_events(2.0) + dp.wait_events(0.2) if isinstance(e, ev.BufferComplete)]
        assert [e.buffer for e in delivered] == [1] and bytes(dp.take(1)) == first
        dp.drop_receive(1)
        dp.post_receive(2, params.packets_per_buffer)
        dp.wait_events(0.3)
        arrive(2, random.Random(6).randbytes(16384), range(3))  # buffer 2 begins in slot 0
        engine._event = event
        for kind, *args in held:  # buffer 1's events, late
            event(kind, *args)
        events = dp.wait_events(1.0) + dp.wait_events(0.2)
        assert not [e for e in events if isinstance(e, ev.BufferComplete)], events
        assert dp.dropped["board completions for a slot given to its next buffer since"] == 1


@pytest.mark.parametrize("order, events", [
    ("in order", ["FirstPacket", "BufferComplete"]),
    ("LDATA first", ["FirstPacket", "LdataSeen", "BufferComplete"]),
])
def test_an_ldata_is_news_to_the_core_only_before_its_buffer_completes(order, events):
    """The buffer's LDATA tells the core how many packets it has (its data timer then
    waits for those only); the LDATA that completes the buffer tells it nothing more than
    the completion, and costs no turn of its own."""
    with receiving(transfer_size=40000) as (board, dp, params, peer):
        data = random.Random(7).randbytes(16384)
        out = bytearray(2000)
        their_port = board.engine.value("PEER_PORT")
        packets = list(range(params.packets_per_buffer))
        for number in packets if order == "in order" else packets[-1:] + packets[:-1]:
            written, _ = pack(out, data, 1448, number, 1, 1, 0, False, their_port, 2998, False)
            peer.sendto(out[:written], ("127.0.0.1", board.netblt_port))
        came: list[ev.Event] = []
        deadline = time.monotonic() + 5
        while not any(isinstance(e, ev.BufferComplete) for e in came) and time.monotonic() < deadline:
            came += dp.wait_events(0.1)
        assert [type(e).__name__ for e in came if not isinstance(e, ev.Arrivals)] == events
        assert bytes(dp.take(1)) == data


def test_data_arriving_is_said_to_the_core_when_it_tells_it_something(monkeypatch):
    """Each push with a DATA event says the peer is alive. The core hears it with a
    high-ack new to it, or ALIVE_EVERY after it last heard: a 16 KiB buffer's first
    packet and its completion come in pushes of their own, and an Arrivals for each was a
    turn of the core a buffer that told it nothing."""
    with receiving(transfer_size=40000) as (board, dp, params, peer):
        clock = [1000.0]  # the board data path's clock (its link's runs on)
        monkeypatch.setattr(board_module, "time", type("Clock", (), {"monotonic": staticmethod(lambda: clock[0])}))
        first = EVENT_WORD.pack(valid=1, kind=Event.RECEIVED, slot=0, flags=RECEIVED_FLAGS.pack(first=1), value=1)
        dp.take_events()
        said = []
        later = 0.003 + ALIVE_EVERY
        for at, high_ack in ((0, 0), (0.001, 0), (0.002, 0), (0.003, 3), (0.004, 3), (later - 0.001, 3),
                             (later + 0.001, 3)):
            clock[0] = 1000.0 + at
            dp.receiving.high_ack = high_ack
            dp._pushed(Pushed(events=[first]))
            said += [(round(e.last_at - 1000.0, 6), e.high_ack) for e in dp.take_events() if isinstance(e, ev.Arrivals)]
        assert said == [(0, 0), (0.003, 3), (round(later + 0.001, 6), 3)]
        monkeypatch.undo()


def settled(dp: BoardDataPath) -> None:
    """Wait until what the data path sent has run on the board: a buffer's upload and SEND
    go QUIET, answered by a later datagram's ``ack``, and the run loop goes on meanwhile."""
    dp.link.wait(dp.link.client.unanswered_requests())


def test_buffers_are_uploaded_one_a_turn_of_the_run_loop():
    """The protocol core hands over every buffer a GO allows at once (16 of 4 MiB on the Versa).
    The host uploads one a turn of its run loop (wait_events), so what came meanwhile (a
    RESEND, an OK) is acted on after one upload, not after all of them: through the Versa's
    design, a RESEND waited 450 ms of a 100 ms path. A buffer whose upload still waits is
    not resent (its first pass carries every packet), and one released leaves the queue."""
    board = ServedBoard()
    dp = BoardDataPath.open(("127.0.0.1", board.port), local_port=2998)
    try:
        params = Params(buffer_size=16384, packet_size=1448, burst_size=1, burst_interval=1000, max_buffers=2,
                        data_checksum=False, death_timer=30)
        dp.configure(params, ("127.0.0.1", 5000), transfer_size=2 * 16384)
        buffers = [bytes([n]) * 16384 for n in (1, 2)]
        for n, data in enumerate(buffers, 1):
            dp.send_buffer(n, data, n == 2)
        memory, slot = board.engine.tx_memory, dp.session.geometry.slot_bytes
        assert not any(memory[:2 * slot])
        dp.wait_events(0)
        settled(dp)
        assert memory[:16384] == buffers[0] and not any(memory[slot:2 * slot])
        dp.resend(2, (0,))
        dp.release(2)
        assert dp.resent == 0
        dp.wait_events(0)
        settled(dp)
        assert not any(memory[slot:2 * slot])
        dp.resend(1, (0,))
        assert dp.resent == 1
    finally:
        dp.close()
        board.close()


def test_the_first_buffer_is_uploaded_while_the_open_is_out():
    """An active sender's first buffer is handed to the data path before any GO
    (load_ahead; 43 ms of upload a 4 MiB buffer, which a long path's transfer waited
    before its first DATA): it is uploaded on the next turn, and the GO's SEND follows
    with no second upload. Other bytes for that buffer (the RESPONSE shrank the buffers)
    are uploaded again; a slot loaded ahead and never handed over gives way to the core's."""
    board = ServedBoard()
    dp = BoardDataPath.open(("127.0.0.1", board.port), local_port=2998)
    uploads: list[int] = []
    upload = dp.link.upload
    dp.link.upload = lambda address, data, then=None: (uploads.append(len(data)), upload(address, data, then))
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
            peer.bind(("127.0.0.1", 0))
            peer.settimeout(2.0)
            first = random.Random(7).randbytes(16384)
            dp.load_ahead(1, first)
            dp.wait_events(0)
            memory = board.engine.tx_memory
            assert uploads == [16384] and memory[:16384] == first
            params = Params(buffer_size=16384, packet_size=1448, burst_size=12, burst_interval=1, max_buffers=2,
                            data_checksum=False, death_timer=30)
            dp.configure(params, peer.getsockname(), transfer_size=3 * 16384)
            dp.set_rate(12, 1)
            dp.send_buffer(1, memoryview(first), False)
            dp.wait_events(0.2)
            for _ in range(params.packets_per_buffer):
                peer.recv(2000)  # buffer 1's DATA, sent from the slot loaded ahead
            assert uploads == [16384] and not dp.sending.uploads

            dp.load_ahead(2, bytes(16384))
            dp.send_buffer(2, first[:8192], False)  # not what was loaded: uploaded again
            dp.wait_events(0)
            settled(dp)
            slot = dp.session.geometry.slot_bytes
            assert uploads == [16384, 8192] and memory[slot:slot + 8192] == first[:8192]

            for n in (1, 2):
                dp.release(n)
            dp.load_ahead(3, bytes(16384))  # buffer 3 then found held by the peer, never sent
            for n in (4, 5):  # two slots: the one loaded ahead gives way
                dp.send_buffer(n, bytes(16384), False)
            assert sorted(s.buffer for s in dp.sending.slots.values()) == [4, 5]
    finally:
        dp.close()
        board.close()


def test_a_lone_transmit_idle_ends_no_wait():
    """TransmitIdle alone (the SENT of the last buffer queued) changes nothing the sending
    core does before its keepalive or its next control message, each of which ends the
    wait anyway: wait_events keeps it until then, not a turn of the run loop of its own
    (the SENT push is what wakes a host whose upload and SEND went QUIET)."""
    board = ServedBoard()
    dp = BoardDataPath.open(("127.0.0.1", board.port), local_port=2998)
    try:
        dp.sending.slots[0] = SendingSlot(1, 16384)
        sent = EVENT_WORD.pack(kind=Event.SENT, slot=0, flags=0, value=0, valid=1)
        dp.link.client.pushed.events.append(sent)
        started = time.monotonic()
        assert dp.wait_events(0.3) == [ev.TransmitIdle()]
        assert time.monotonic() - started >= 0.3  # held to the wait's end
    finally:
        dp.close()
        board.close()


def test_a_sending_host_has_its_board_hold_events_for_the_peers_ok():
    """A sending host's board holds its events for a control packet (PUSH_HOLD: a buffer's
    SENT goes with the peer's OK, one wake for both); the connection's end sets it back, so
    a receiving host's events, which start its downloads, are never held."""
    board = ServedBoard()
    dp = BoardDataPath.open(("127.0.0.1", board.port), local_port=2998)
    try:
        assert board.link.settings["PUSH_HOLD"] == 0
        params = Params(buffer_size=16384, packet_size=1448, burst_size=1, burst_interval=1000, max_buffers=2,
                        data_checksum=False, death_timer=30)
        dp.configure(params, ("127.0.0.1", 5000), transfer_size=16384)
        dp.send_buffer(1, bytes(16384), True)
        dp.wait_events(0)
        settled(dp)
        assert board.link.settings["PUSH_HOLD"] == dp.session.clock.cycles(board_transmit.PUSH_HOLD) > 0
        dp.reset()
        assert board.link.settings["PUSH_HOLD"] == 0
    finally:
        dp.close()
        board.close()
