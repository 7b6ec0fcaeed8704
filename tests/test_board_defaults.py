"""Defaults that fit the board, and a host that stops when told: ``netblt send --board``
through the board's model (sim-board --model), as a user runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest
from clitools import SimBoard, finish, handles, reports, send, spawn, start_recv, until

from netblt.formats import host_link as F


@pytest.fixture
def model(request):
    """The Versa's DRAM geometry (4 MiB slots) on a wire of the MTU the test names."""
    board = SimBoard("--model", "--board", "versa_ecp5", "--slots", "dram", "--mtu", str(getattr(request, "param", 1500)))
    yield board
    board.close()


def sent_through(model: SimBoard, tmp_path, *options: str, size: int = 6 << 20) -> tuple[dict, dict]:
    source = tmp_path / "data.bin"
    source.write_bytes(os.urandom(size))
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out))
    done = send(str(source), f"127.0.0.1:{port}", "--json", "--board", model.link_address, "--local-port",
                str(model.netblt), *options)
    assert done.returncode == 0, done.stderr
    (received,), _ = finish(recv)
    assert (out / "data.bin").read_bytes() == source.read_bytes()
    (report,) = reports(done.stdout)
    return report, received


@pytest.mark.parametrize("model", [1500, 9000], indirect=True)
def test_a_board_sender_fills_its_slots_in_the_largest_datagrams_that_reach_the_board(model, tmp_path):
    """No --buffer-size: a buffer a slot (4 MiB; the software path's default is 1024
    packets), and no --buffers: as many outstanding as the board has slots (16; 8 in
    software); no --link-mtu: jumbo frames where they reach the board, else 1500 bytes
    (the requests show which: 4 MiB is 2,881 uploads at 1500 and 469 at 9000)."""
    report, _ = sent_through(model, tmp_path)
    assert report["buffer_size"] == 4 << 20 and report["outstanding_buffers"] == 16
    uploads = sum(-(-size // (4 * F.max_words(int(model.proc.args[-1])))) for size in (4 << 20, 2 << 20))
    assert uploads <= report["host_link_requests"] < uploads + 100  # and a few dozen register requests


def test_the_files_of_a_directory_find_the_boards_link_mtu_once(tmp_path):
    """Each file of a directory is a session with the board; each probed the host link
    with jumbo datagrams again, which a 1500-byte board never answers (0.3 s a file: 20
    small files took 7.6 s, 1.9 now). The model counts the probes it dropped: a directory
    of three files draws those of one."""
    folder = tmp_path / "dir"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / name).write_bytes(os.urandom(20_000))
    dropped = []
    for what in (folder / "a", folder):
        board = SimBoard("--model", "--board", "versa_ecp5", "--slots", "dram")
        try:
            out = tmp_path / f"out-{what.name}"
            out.mkdir()
            recv, port = start_recv(tmp_path, "--out", str(out))
            done = send(str(what), f"127.0.0.1:{port}", "--board", board.link_address, "--local-port",
                        str(board.netblt))
            assert done.returncode == 0, done.stderr
            finish(recv)
            code, summary = board.stop()
        finally:
            board.close()
        assert code == 0
        (line,) = [line for line in summary.splitlines() if "over the 1500-byte MTU (dropped)" in line]
        dropped.append(int(line.rsplit(":", 1)[1]))
    assert dropped[0] > 0 and dropped[1] == dropped[0], dropped


def test_a_buffer_size_and_buffers_given_are_kept(model, tmp_path):
    report, received = sent_through(model, tmp_path, "--buffer-size", "1M", "--buffers", "4")
    assert report["buffer_size"] == received["buffer_size"] == 1 << 20
    assert report["outstanding_buffers"] == 4


def test_a_link_mtu_the_board_cannot_take_ends_at_once_in_one_line(model, tmp_path):
    """A wire of 1500 bytes and --link-mtu 9000: one line naming both, within seconds (it
    was a 593 s storm of jumbo datagrams, 45 GB of them)."""
    (tmp_path / "f").write_bytes(bytes(1000))
    started = time.monotonic()
    done = send(str(tmp_path / "f"), "127.0.0.1:9", "--board", model.link_address, "--link-mtu", "9000")
    assert time.monotonic() - started < 5
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"netblt: error: board {model.link_address}: 9000-byte datagrams do not reach it (--link-mtu 9000); "
        "1500-byte ones do: give --link-mtu 1500, or leave it out"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("mtu", ["500", "9001", "jumbo"])
def test_a_link_mtu_no_host_link_can_have_is_a_usage_error(tmp_path, mtu):
    (tmp_path / "f").write_bytes(bytes(10))
    done = send(str(tmp_path / "f"), "127.0.0.1:9", "--board", "127.0.0.1:9", "--link-mtu", mtu)
    assert done.returncode == 2 and "argument --link-mtu:" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("how, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_a_host_whose_board_went_silent_within_a_second(model, tmp_path, how, code):
    """Mid-transfer the board stops answering; the signal aborts the transfer, the board
    gets half a second for the last words, and the host is gone within a second."""
    source = tmp_path / "data.bin"
    source.write_bytes(os.urandom(8 << 20))
    (tmp_path / "out").mkdir()
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "out"))
    sender = spawn(["send", str(source), f"127.0.0.1:{port}", "--board", model.link_address, "--local-port",
                    str(model.netblt), "--rate", "8M"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    model.proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(0.3)
        signalled = time.monotonic()
        sender.send_signal(how)
        _, stderr = sender.communicate(timeout=30)
        assert time.monotonic() - signalled < 1.0
    finally:
        model.proc.send_signal(signal.SIGCONT)
    assert sender.returncode == code, stderr
    assert f"interrupted ({how.name})" in stderr.splitlines()[-1] and "Traceback" not in stderr
    recv.kill()


def test_a_signal_while_the_host_waits_for_its_board_says_interrupted(model, tmp_path):
    """A board that never answers (stopped): the host waits for it, and a SIGTERM ends the
    wait at once with the one line and status 143."""
    (tmp_path / "f").write_bytes(bytes(1000))
    model.proc.send_signal(signal.SIGSTOP)
    try:
        sender = spawn(["send", str(tmp_path / "f"), "127.0.0.1:9", "--board", model.link_address],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        until(lambda: handles(sender, signal.SIGTERM), "the sender's SIGTERM handler")
        time.sleep(0.5)  # into its wait for the board
        signalled = time.monotonic()
        sender.send_signal(signal.SIGTERM)
        _, stderr = sender.communicate(timeout=30)
        assert time.monotonic() - signalled < 1.0
    finally:
        model.proc.send_signal(signal.SIGCONT)
    assert sender.returncode == 143 and stderr.strip().splitlines()[-1] == "netblt: interrupted (SIGTERM)", stderr


def test_no_answer_through_a_board_names_the_port_the_answer_must_reach(model, tmp_path):
    """An OPEN that no peer answers (here none listens; through sim-board, often a NETBLT
    port it does not bridge): the failure names the board's NETBLT port and the fix."""
    (tmp_path / "f").write_bytes(bytes(1000))
    done = send(str(tmp_path / "f"), "127.0.0.1:9", "--board", model.link_address, "--local-port", "3999",
                "--death-timer", "2")
    assert done.returncode == 1 and "no answer to OPEN in 2 s" in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"netblt: nothing came back to board {model.link_address}'s NETBLT port 3999: the peer must reach that "
        "port (a netblt sim-board bridges only the NETBLT port it printed: give it as --local-port)")
