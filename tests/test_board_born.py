"""Data born on the board (``netblt send --source pattern``), on the host's side: the
pattern made at memory speed, the receiver's check of every byte, ``netblt check``, and
transfers through the software data path and the board's functional model. The same
transfer through the board's design under Verilator is in tests/test_board_conformance.py."""

import contextlib
import io
import json
import math
import threading
import time
from dataclasses import replace
import os
import subprocess

import pytest
from clitools import NETBLT, SimBoard, finish, free_port, reports, send, spawn, start_recv
from link_board import ServedBoard
from hypothesis import given, settings, strategies as st

from register_link import session

from netblt.driver import board_transmit as transmit
from netblt.driver import core
from netblt.driver.board import BoardDataPath
from netblt.driver.board_receive import ReceiveSlots
from netblt.driver.board_transmit import TransmitSlots
from netblt.driver.link import BoardLink
from netblt.driver.link_client import LinkClient
from netblt.formats import host_link as F
from netblt.formats.boards import SIMULATION
from netblt.formats.registers import ADDRESS, COMMAND_WORD, CONNECTION_FLAGS, Command, PacingMode
from netblt.formats.born import PatternBuffer
from netblt.driver.compiled import fastpath
from netblt.driver.pattern import first_difference, pattern
from netblt.formats.pattern import pattern_bytes
from netblt.host.announce import Announcement, read
from netblt.host.check import check
from netblt.host.cli import main
from netblt.sim.model.engine_model import EngineModel
from netblt.host.files import Expectation, FileSink, PatternCheck, PatternData, StampCheck


def pattern_file(size: int, buffer_size: int) -> bytes:
    return b"".join(pattern_bytes(k, min(buffer_size, size - k * buffer_size))
                    for k in range(math.ceil(size / buffer_size)))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 0xFFFF_FFFF), st.integers(0, 5000))
def test_the_compiled_pattern_is_the_defined_one(key, length):
    assert fastpath is not None  # make test builds it; the Python loop would be 100 times slower
    assert bytes(pattern(key, length)) == pattern_bytes(key, length)


def test_the_pattern_source_hands_out_buffers_keyed_by_index():
    source = PatternData(40_000)
    assert source.buffer(0, 16384) == (PatternBuffer(0, 16384), False)
    assert source.buffer(2, 16384) == (PatternBuffer(2, 7232), True)
    assert source.buffer(3, 16384) is None
    assert source.buffer(1, 20_000) == (PatternBuffer(1, 20_000), True)


def test_the_announcement_carries_the_pattern_and_nothing_else_of_it():
    announced = Announcement("p", 1000, data="pattern")
    assert b" data=pattern " in announced.encode() and not announced.trailer
    assert read(announced.encode()) == announced
    with pytest.raises(ValueError, match="data=zeros: this receiver knows data=pattern, stamps, port"):
        read(b"netblt-file/1 size=5 data=zeros name=p")
    with pytest.raises(ValueError, match="data=pattern has a size and no digest"):
        read(b"netblt-file/1 size=stream data=pattern name=p")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 9000), st.integers(0, 8999), st.integers(1, 4000))
def test_the_receivers_check_finds_the_first_wrong_byte_however_the_data_comes(buffer_size, size, wrong, piece):
    data = bytearray(pattern_file(size, buffer_size))
    assert _checked(data, buffer_size, piece) is None
    wrong %= size
    data[wrong] ^= 0x40
    assert _checked(data, buffer_size, piece) == wrong


def _checked(data: bytes, buffer_size: int, piece: int) -> int | None:
    checking = PatternCheck(buffer_size)
    for at in range(0, len(data), piece):
        checking.update(at, data[at:at + piece])
    return checking.wrong


def stamp_data(*runs: range) -> bytes:
    return b"".join(n.to_bytes(4, "little") for run in runs for n in run)


@pytest.mark.parametrize("data, wrong, missing", ids=["gaps between buffers", "a gap inside one", "backwards"],
                         argvalues=[
    (stamp_data(range(5, 9), range(10, 14), range(20, 24)), None, 5 + 1 + 6),  # refused before, and between
    (stamp_data(range(0, 4), range(4, 6), range(7, 9)), 24, 0),  # a word skipped inside a buffer
    (stamp_data(range(10, 14), range(3, 7)), 16, 10),  # a buffer that goes back
])
def test_the_receivers_stamp_check_counts_the_words_refused_between_buffers(data, wrong, missing):
    for piece in (1, 3, 16, len(data)):
        checking = StampCheck(16)
        for at in range(0, len(data), piece):
            checking.update(at, data[at:at + piece])
        assert (checking.wrong, checking.missing) == (wrong, missing)


def test_first_difference_says_where_and_when_one_ends_early():
    assert first_difference(b"abc", b"abc") is None
    assert first_difference(b"abc", b"abd") == 2
    assert first_difference(b"abc", b"ab") == 2


def test_a_pattern_transfer_resumes_only_at_the_same_buffer_size(tmp_path):
    """The pattern starts over at each buffer: a partial file cut at other boundaries is other data."""
    size, buffer_size = 5000, 1000
    expect = Expectation(Announcement("p", size, data="pattern"))
    root = os.open(tmp_path, os.O_RDONLY)
    try:
        sink = FileSink(root, "p", expect, buffer_size)
        sink.write(1000, memoryview(pattern(1, 1000)))
        sink.keep_or_discard()
        resumed = FileSink(root, "p", expect, buffer_size)
        assert resumed.held == {2}  # buffer numbers count from 1
        resumed.close()  # as a receiver closes each: the lock on its partial file goes with it
        other = FileSink(root, "p", expect, 2 * buffer_size)
        assert other.held == frozenset()
        other.close()
    finally:
        os.close(root)


# -- netblt check ------------------------------------------------------------------------------


def test_check_finds_the_buffer_size_and_every_wrong_byte(tmp_path):
    good = tmp_path / "good"
    good.write_bytes(pattern_file(100_000, 14480))
    verdict = check(str(good))
    assert verdict.ok and verdict.buffer_size == 14480
    bad = tmp_path / "bad"
    data = bytearray(good.read_bytes())
    data[50_001] ^= 1
    bad.write_bytes(data)
    done = subprocess.run(NETBLT + ["check", str(good), str(bad)], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        f"{good}: the test pattern, 100000 bytes in 7 buffers of 14480: every byte matches",
        f"{bad}: 100000 bytes in 7 buffers of 14480: not the test pattern from byte 50001 on (buffer 3, its byte 6561)"]
    done = subprocess.run(NETBLT + ["check", "--json", "--buffer-size", "14480", str(good)],
                          capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout) == {
        "path": str(good), "ok": True, "bytes": 100_000, "buffer_size": 14480, "first_wrong_byte": None}


@pytest.mark.parametrize("content, message", ids=["empty", "other"], argvalues=[
    (b"", None),
    (bytes(range(100)), "is not the test pattern: it differs from byte 0 on, where no buffer begins"),
])
def test_check_of_what_is_not_a_pattern_file_is_one_line(tmp_path, content, message):
    path = tmp_path / "f"
    path.write_bytes(content)
    done = subprocess.run(NETBLT + ["check", str(path), str(tmp_path / "missing")], capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"cannot read {tmp_path / 'missing'}: No such file or directory" in done.stderr
    assert (message in done.stderr) if message else done.stdout == f"{path}: empty\n"


# -- transfers ----------------------------------------------------------------------------------


def relay(forward: int, seed: int) -> int:
    """``netblt netem`` before ``forward``: 5% lost, 5% duplicated, 10% held back 2 ms."""
    port = free_port()
    proc = spawn(["netem", "--listen", f"127.0.0.1:{port}", "--forward", f"127.0.0.1:{forward}", "--loss", "5%",
                  "--duplicate", "5%", "--reorder", "10%", "--delay", "2ms", "--seed", str(seed)],
                 stdout=subprocess.PIPE, text=True)
    assert "netblt netem" in proc.stdout.readline()
    return port


def test_the_software_path_sends_the_pattern_through_loss_reordering_and_duplication(tmp_path):
    size = 3_000_001
    recv, port = start_recv(tmp_path)
    done = send("--source", "pattern", "--size", str(size), "--name", "p.bin", f"127.0.0.1:{relay(port, 3)}",
                "--json", "--rate", "200M")
    (receiver,), _ = finish(recv)
    assert done.returncode == 0, done.stderr
    sender = reports(done.stdout)[0]
    assert receiver["ok"] and receiver["data"] == "pattern" and receiver["bytes"] == size and receiver["sha256"] == ""
    assert receiver["packets_lost"] > 0 and sender["packets_retransmitted"] > 0
    assert (tmp_path / "p.bin").read_bytes() == pattern_file(size, receiver["buffer_size"])


def one_byte_wrong(key: int, length: int) -> bytearray:
    """The software path's pattern with byte 100 of buffer 2 flipped."""
    data = pattern(key, length)
    if key == 2:
        data[100] ^= 1
    return data


def test_a_receiver_finds_a_wrong_byte_in_the_pattern_and_keeps_no_file(tmp_path, monkeypatch, capsys):
    """The sender's data path makes buffer 2 with one byte wrong: the receiver's check
    fails the transfer at its end, the sender hears why, and no file is left."""
    monkeypatch.setattr(core, "pattern", one_byte_wrong)
    recv, port = start_recv(tmp_path)
    code = main(["send", "--source", "pattern", "--size", "100000", "--buffer-size", "14480",
                 f"127.0.0.1:{port}"])
    (receiver,), _ = finish(recv)
    assert code == 1 and not receiver["ok"]
    why = "the data is not the test pattern from byte 29060 on (buffer 2, its byte 100)"
    assert receiver["reason"] == why and why in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def model():
    board = SimBoard("--model")
    yield board
    board.close()


def test_a_board_model_makes_the_pattern_and_the_host_moves_control_only(model, tmp_path):
    """FILL and SEND queued together a buffer: the host link carries a few percent of
    what the data's upload would, and the receiver checks every byte."""
    size = 2_000_000
    recv, port = start_recv(tmp_path)
    done = send("--source", "pattern", "--size", str(size), f"127.0.0.1:{relay(port, 5)}", "--board",
                model.link_address, "--local-port", str(model.netblt), "--json", timeout=240)
    (receiver,), _ = finish(recv)
    assert done.returncode == 0, done.stderr
    sender = reports(done.stdout)[0]
    assert receiver["ok"] and receiver["data"] == "pattern" and receiver["bytes"] == size
    assert sender["data_path"] == "board" and sender["data"] == "pattern" and sender["packets_retransmitted"] > 0
    assert sender["host_link_bytes"] < size / 10  # 2% on a clean path, 5% at this loss; an upload alone is 100%
    assert (tmp_path / "pattern").read_bytes() == pattern_file(size, 16384)


def test_a_board_sends_its_stamp_source_through_its_source_port_and_every_word_is_accounted_for(model, tmp_path):
    """Stamps faster than two 16 KiB slots carry: the port refuses words while no slot is
    free, and counts them; the receiver sees them as gaps between buffers, none inside."""
    size = 1 << 20
    recv, port = start_recv(tmp_path)
    done = send("--source", "stamps", "--stamp-rate", "300M", "--size", str(size), f"127.0.0.1:{port}", "--board",
                model.link_address, "--local-port", str(model.netblt), "--json", timeout=240)
    (receiver,), _ = finish(recv)
    assert done.returncode == 0, done.stderr
    sender = reports(done.stdout)[0]
    assert receiver["ok"] and receiver["data"] == "stamps" and receiver["bytes"] == size
    assert sender["source_taken"] == size // 4  # every word taken arrived
    # Refused before the first take and between takes; the board also counts those it
    # refused after the last, until the report read its counters.
    assert 0 < receiver["stamps_missing"] <= sender["source_refused"]
    data = (tmp_path / "stamps").read_bytes()
    numbers = [int.from_bytes(data[i:i + 4], "little") for i in range(0, size, 4)]
    assert numbers[-1] + 1 - len(numbers) == receiver["stamps_missing"]


NOTHING_BORN = {"fill": False, "check": False, "take": False, "sink": False}


@pytest.mark.parametrize("args, lacking, message", [
    (["send", "--source", "pattern", "--size", "1M", "127.0.0.1:9"], NOTHING_BORN, "has no pattern source"),
    (["send", "--source", "stamps", "--size", "1M", "127.0.0.1:9"], NOTHING_BORN, "has no source port"),
    (["recv", "--sink", "port", "--listen", ":0"], NOTHING_BORN, "has no sink port"),
    (["recv", "--sink", "check", "--listen", ":0"], NOTHING_BORN, "has no sink port"),
    (["recv", "--sink", "check", "--listen", ":0"], {"check": False}, "has no pattern checker"),
])
def test_a_board_without_a_pattern_source_a_port_or_a_checker_says_so(args, lacking, message, capsys):
    """A build without them (GEOMETRY says so): one line, before any peer is reached."""
    board = ServedBoard(replace(SIMULATION, **lacking))
    try:
        code = main([*args, "--board", board.address])
    finally:
        board.close()
    err = capsys.readouterr().err
    assert code == 1 and f"board {board.address} {message}: its bitstream was built without one" in err, err


def test_the_models_fill_runs_after_its_reply_and_before_anything_after_it():
    """The gateware replies to a FILL at once and fills as the segmenter waits: the
    model's 4 MiB fill held its reply back so long that the host took it for lost."""
    engine = EngineModel(SIMULATION)
    for name, value in (("ARG0", 7), ("ARG1", 64), ("COMMAND", COMMAND_WORD.pack(op=Command.FILL, slot=0, flag=1))):
        engine.write(ADDRESS[name], value, 0.0)
    assert engine.tx_memory[:64] == bytes(64)  # not while the request runs
    engine.upload(0, b"upload!!")
    assert engine.tx_memory[:64] == b"upload!!" + pattern(7, 64)[8:]


def test_the_model_keeps_a_boards_pace_through_a_stall_of_its_own_loop():
    """A board's pacer never waits; the model's loop does, some 6 ms for a 4 MiB slot's
    fill: the DATA due meanwhile start at their paced times (its WAN delivers them then),
    not when the loop came back (which cost 16% of a 297 Mb/s pace through 4 MiB slots)."""
    engine = EngineModel(SIMULATION)
    interval = SIMULATION.clock_hz // 1000  # a burst of 2 packets a millisecond
    for name, value in (("PACKET_SIZE", 64), ("PACING_MODE", PacingMode.BURSTS), ("BURST_SIZE", 2),
                        ("BURST_INTERVAL", interval), ("PEER_ADDRESS", 0x7F000001), ("UDP_PEER_PORT", 9),
                        ("FLAGS", CONNECTION_FLAGS.pack(udp=1)), ("ARG0", 1), ("ARG1", 64 * 16),
                        ("COMMAND", COMMAND_WORD.pack(op=Command.SEND, slot=0))):
        engine.write(ADDRESS[name], value, 0.0)
    late = engine.outgoing(0.006)  # the loop away for 6 ms after the SEND
    bursts = sorted({round(starts, 4) for _, _, starts in late})
    assert bursts == [0.0, 0.001, 0.002, 0.003, 0.004, 0.005, 0.006]


def sending_side(queued: list[int], pace: float) -> TransmitSlots:
    """A transmit side over a register file, with buffers of ``queued`` bytes given to the
    board and not yet sent, and a pace set in bytes a second."""
    side = TransmitSlots(session(), [])
    for number, size in enumerate(queued, 1):
        side.send_buffer(number, PatternBuffer(number - 1, size), False)  # made on the board: nothing to upload
    side.pace = pace
    return side


def test_a_board_is_left_alone_for_half_of_what_it_has_queued_less_the_buffer_it_may_be_finishing():
    mib, clean = 1 << 20, time.monotonic() + transmit.LOSS_MEMORY + 1  # the path clean by then
    assert sending_side([], 100 * mib).unattended(clean) == sending_side([4 * mib], 100 * mib).unattended(clean) == 0
    assert sending_side([4 * mib] * 2, 0.0).unattended(clean) == 0  # no pace known yet
    assert sending_side([4 * mib, 2 * mib, 4 * mib], 100 * mib).unattended(clean) == pytest.approx(0.03)
    assert sending_side([4 * mib] * 16, 50 * mib).unattended(clean) == transmit.LEAVE_CLEAN  # 0.6 s queued: at most


def test_a_board_is_left_alone_longer_while_its_peer_asks_for_no_resends():
    """On a clean path only OKs come, and a longer sleep takes several buffers' in one wake;
    a RESEND would wait that long, so for a while after the peer's last one the host
    comes back as often as before. A connection's path counts as lossy until it has been
    clean that long."""
    side = sending_side([4 << 20] * 16, 50 << 20)
    side.configure()
    now = time.monotonic()
    assert side.unattended(now) == transmit.LEAVE_AT_MOST
    now += transmit.LOSS_MEMORY
    assert side.unattended(now) == transmit.LEAVE_CLEAN
    side.sent(2)
    side.resend(3, (7, 9))
    resent = time.monotonic()
    assert side.unattended(resent + transmit.LOSS_MEMORY - 0.01) == transmit.LEAVE_AT_MOST < transmit.LEAVE_CLEAN
    assert side.unattended(resent + transmit.LOSS_MEMORY) == transmit.LEAVE_CLEAN


def test_a_sending_host_leaves_a_board_with_buffers_queued_and_hears_each_push_once(tmp_path, monkeypatch):
    """The Versa's sixteen 4 MiB slots: while the board has buffers queued, its host
    sleeps and takes the replies and peer's messages of the while in one wake (many of
    its wakes while data flows come from a sleep, not from a datagram): the board pushes
    every control packet it holds at once, so the host acknowledges a push and sleeps
    again, waiting for no other; the board, told to wait for its acknowledgements that
    long, never pushes twice. The model runs in a process of its own,
    as a board is hardware of its own: in a thread of this one it shared the interpreter
    with the host, and once in a make test (the bitstream's build beside it) a push went
    unacknowledged past its timeout and came again."""
    board = SimBoard("--model", "--board", "versa_ecp5", "--slots", "dram", "--mtu", "9000")
    seen = []  # "slept", "step" (a wake) and "buffer" (one given to the board), in order
    packets = []  # control packets a push carried, each push
    step, send_buffer, leave = BoardLink.step, BoardDataPath.send_buffer, BoardDataPath._leave_board
    pushed_body = LinkClient.pushed_body

    def leaving(dp, end):
        started = time.monotonic()
        leave(dp, end)
        if time.monotonic() - started >= transmit.LEAVE_AT_LEAST:
            seen.append("slept")

    def stepping(link, until):
        pushed = link.client.held_push
        step(link, until)
        seen.append("step" if link.client.held_push == pushed else "pushed")

    monkeypatch.setattr(BoardLink, "step", stepping)
    monkeypatch.setattr(LinkClient, "pushed_body", lambda client, body: (
        packets.append(len(F.decode_events(body)[1])), pushed_body(client, body)))
    monkeypatch.setattr(BoardDataPath, "send_buffer", lambda *a: seen.append("buffer") or send_buffer(*a))
    monkeypatch.setattr(BoardDataPath, "_leave_board", leaving)
    monkeypatch.setattr(transmit, "LOSS_MEMORY", 0.2)  # clean within the transfer: the long sleeps come
    size = 128 << 20
    try:
        recv, port = start_recv(tmp_path)
        code = main(["send", "--source", "pattern", "--size", str(size), "--buffer-size", "4M", "--link-mtu", "9000",
                     "--board", board.link_address, "--local-port", str(board.netblt), "-q", f"127.0.0.1:{port}"])
        (receiver,), _ = finish(recv)
        retries = board.status()["LINK_PUSH_RETRIES"]
    finally:
        board.close()
    assert code == 0 and receiver["ok"] and receiver["bytes"] == size
    assert retries == 0
    flowing = seen[seen.index("buffer"):len(seen) - seen[::-1].index("buffer")]
    wakes = [i for i, what in enumerate(flowing) if what in ("step", "pushed")]
    after_sleep = sum(flowing[i - 1] == "slept" for i in wakes if i)
    assert after_sleep > len(wakes) / 4, (after_sleep, len(wakes))
    # The peer's OKs that came while the host slept reach it in one push, which it
    # acknowledges before sleeping again (one push out at a time, each with one OK, was
    # one buffer a wake).
    assert max(packets) > 1 and sum(packets) > len(packets), packets
    assert "slept" in {flowing[i + 1] for i, what in enumerate(flowing[:-1]) if what == "pushed"}


def checking(board: SimBoard) -> subprocess.Popen:
    """``netblt recv --board --sink check --json``, once it waits for a sender."""
    recv = spawn(["recv", "--board", board.link_address, "--listen", f":{board.netblt}", "--sink", "check", "--json"],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = ""
    while "waiting for a sender" not in (line := recv.stderr.readline()):
        said += line
        assert line, said
    return recv


def test_a_receiving_board_finds_a_wrong_byte_in_the_pattern(model, monkeypatch, capsys):
    """The sender makes buffer 2 with one byte wrong: the receiving board's CHECK counts
    its beat, and the transfer fails at its end with the buffer named."""
    monkeypatch.setattr(core, "pattern", one_byte_wrong)
    recv = checking(model)
    code = main(["send", "--source", "pattern", "--size", "100000", "--buffer-size", "16K",
                 f"127.0.0.1:{model.netblt}"])
    (receiver,), _ = finish(recv)
    why = "the board found 1 beats that are not the test pattern, the first in buffer 2"
    assert code == 1 and not receiver["ok"] and receiver["reason"] == why
    assert why in capsys.readouterr().err


def test_a_receiving_board_drains_to_its_sink_port_in_the_order_sent(tmp_path, monkeypatch):
    """``recv --sink port`` through loss and reordering: buffers complete out of order in
    the board's two slots, and the board drains them to its sink port in the order sent,
    each once; the receiver keeps nothing and reports what the port took."""
    board = ServedBoard()
    completed, drained = [], []
    complete, command = ReceiveSlots._completed, ReceiveSlots._command
    monkeypatch.setattr(ReceiveSlots, "_completed",
                        lambda side, index, slot, *a: completed.append(slot.buffer) or complete(side, index, slot, *a))
    monkeypatch.setattr(ReceiveSlots, "_command", lambda side, op, index, *a: (
        drained.append(a[0] + 1) if op == Command.DRAIN else None) or command(side, op, index, *a))
    size, out = 600_000, io.StringIO()
    result = {}
    receiving = threading.Thread(target=lambda: result.update(code=main(
        ["recv", "--board", board.address, "--listen", f":{board.netblt_port}", "--sink", "port", "--json"])))
    try:
        with contextlib.redirect_stdout(out):
            receiving.start()
            time.sleep(1.0)
            done = send("--source", "pattern", "--size", str(size), "--buffer-size", "16K",
                        f"127.0.0.1:{relay(board.netblt_port, 4)}", "--json", "--rate", "100M", timeout=120)
            receiving.join(120)
    finally:
        board.close()
    (receiver,) = reports(out.getvalue())
    assert done.returncode == 0 and result["code"] == 0, done.stderr
    assert receiver["ok"] and receiver["bytes"] == size and receiver["path"] == "(drained to the board's sink port)"
    assert drained == list(range(1, math.ceil(size / 16384) + 1))
    assert completed != sorted(completed)  # the loss made the order worth keeping


def test_a_checking_board_refuses_a_file(model, tmp_path):
    recv = checking(model)
    (tmp_path / "f").write_bytes(b"x" * 1000)
    done = send(str(tmp_path / "f"), f"127.0.0.1:{model.netblt}", timeout=60)
    recv.terminate()  # it ends its session with the board
    recv.communicate(timeout=60)
    assert done.returncode == 1
    assert "this receiver's board checks the test pattern and keeps nothing: send --source pattern" in done.stderr


def test_the_software_path_has_no_source_port():
    done = send("--source", "port", "--size", "1M", "127.0.0.1:9", timeout=60)
    assert done.returncode == 1
    assert "--source port needs a board (--board): the software data path has no source port" in done.stderr
