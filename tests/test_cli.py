"""The ``netblt`` command end to end: real processes, real sockets, loopback only."""

import hashlib
import json
import os
import re
import signal
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from clitools import NETBLT, finish, free_port, reports, send, spawn, start_recv, until
from rich.progress import Progress

from netblt.driver import transport
from netblt.host import files
from netblt.host.cli import BitRateColumn, main
from netblt.protocol.codec import decode, encode
from netblt.protocol.packets import Open, Refused

@pytest.fixture
def payload(tmp_path: Path) -> Path:
    path = tmp_path / "payload.bin"
    path.write_bytes(os.urandom(3_000_001))
    return path


def test_send_and_receive_over_loopback(tmp_path, payload):
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out))
    sent = send(str(payload), f"127.0.0.1:{port}", "--json")
    stdout, _ = recv.communicate(timeout=60)
    assert sent.returncode == 0, sent.stderr
    assert recv.returncode == 0
    s, r = json.loads(sent.stdout), json.loads(stdout)
    for report in (s, r):
        assert {"bytes", "sha256", "steady_state_mbps", "real_mbps", "packets_lost",
                "packets_retransmitted", "data_timeouts", "ok"} <= report.keys()
        assert report["ok"] and report["bytes"] == 3_000_001
        assert report["data_path"] == "software" and report["dropped"] == {}
        # Both CPU figures cover the same span: the data path's threads are part of the process.
        assert 0 < report["datapath_cpu_seconds"] <= report["cpu_seconds"]
    assert s["sha256"] == r["sha256"]
    assert 0 < r["round_trip_ms"] < 1000 and s["round_trip_ms"] == 0  # the receiver times its OKs
    assert (out / "payload.bin").read_bytes() == payload.read_bytes()
    assert not list(out.glob("*.partial"))


def test_send_through_the_relay_with_loss_and_delay(tmp_path, payload):
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "copy.bin"))
    relay_port = free_port()
    relay = spawn(["netem", "--listen", f"127.0.0.1:{relay_port}", "--forward",
                                       f"127.0.0.1:{port}", "--delay", "20ms", "--loss", "0.05",
                                       "--duration", "90s"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert "netblt netem" in relay.stdout.readline()
    try:
        sent = send(str(payload), f"127.0.0.1:{relay_port}", "--json", "--rate", "200M")
        stdout, _ = recv.communicate(timeout=60)
    finally:
        relay.terminate()
        relay.wait()
    assert sent.returncode == 0, sent.stderr
    r = json.loads(stdout)
    assert r["ok"] and r["packets_lost"] > 0 and r["data_timeouts"] > 0
    assert r["dropped"] == {}  # late copies of delivered buffers are duplicates, not bad packets
    s = json.loads(sent.stdout)  # the sender's view: packets asked for again, and sent again
    assert s["packets_lost"] > 0 and s["packets_retransmitted"] > 0
    assert (tmp_path / "copy.bin").read_bytes() == payload.read_bytes()


def test_no_receiver_is_one_clear_error_and_no_report(payload):
    result = send(str(payload), f"127.0.0.1:{free_port()}", timeout=30)
    assert result.returncode == 1
    assert "send failed: peer unreachable: nothing is listening there (port unreachable)" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # no table of zeros, no digest of nothing


@pytest.mark.parametrize("args, message", [
    (["send", "x", "127.0.0.1", "--rate", "fast"], "bad rate 'fast'"),
    (["send", "x", "127.0.0.1", "--buffers", "0"], "must be at least 1"),
    (["send", "x", "127.0.0.1", "--rate", "1G", "--burst-size", "5"], "not both"),
    (["send", "x", "127.0.0.1", "--packet-size", "70000"], "packet size 70000 is outside"),
    (["send", "x", "127.0.0.1", "--transport", "tcp"], "invalid choice"),
    (["recv", "--listen", "127.0.0.1:99999"], "port 99999 is outside"),
    (["send", "x", "127.0.0.1:0"], "port 0 in '127.0.0.1:0' is no receiver's port"),
    (["send", "x", "[::1"], "bad address '[::1': use [IPv6]:PORT"),
    (["send", "x", "y", "127.0.0.1", "--name", "z"], "--name names one file; several were given"),
    (["send", "127.0.0.1"], "give what to send: files, directories, - for standard input, or --source pattern"),
    (["send", "127.0.0.1", "--source", "pattern"], "--source pattern needs --size, e.g. --size 10G"),
    (["send", "x", "127.0.0.1", "--source", "pattern", "--size", "1M"], "--source pattern sends instead of files"),
    (["send", "x", "127.0.0.1", "--size", "1M"], "--size is how much --source sends"),
    (["send", "127.0.0.1", "--source", "pattern", "--size", "1M", "--name", ".p"], "cannot send pattern as '.p'"),
    (["send", "127.0.0.1", "--source", "noise", "--size", "1M"], "invalid choice: 'noise'"),
    (["send", "127.0.0.1", "--source", "stamps", "--size", "1M", "--stamp-rate", "x"], "bad rate 'x'"),
    (["send", "127.0.0.1", "--source", "pattern", "--size", "1M", "--stamp-rate", "1M"],
     "--stamp-rate is the rate of --source stamps"),
    (["recv", "--sink", "check"], "--sink check needs --board (the board takes the data) and keeps nothing"),
    (["recv", "--sink", "port", "--board", "127.0.0.1:9", "--out", "x"],
     "--sink port needs --board (the board takes the data) and keeps nothing: no --out"),
    (["send", ".", "127.0.0.1", "--name", "z"], "--name names a file, not a directory"),
    (["send", "x", "127.0.0.1", "--rate", "1"], "rate 1 b/s is below the slowest 1448-byte packets allow"),
    (["recv", "--allow", "300.1.1.1"], "bad address or prefix '300.1.1.1'"),
    (["send", "x", "127.0.0.1", "--secret-file", "/nonexistent"], "cannot read the secret file /nonexistent"),
    (["board"], "the following arguments are required: {status,watch,find,release,take-over,reset}"),
    (["board", "find", "10.0.0.0/8"], "10.0.0.0/8 has 16777216 addresses; ask at most 4096 (/20 or longer)"),
    (["board", "find", "nonsense"], "'nonsense' is not an IPv4 network (give ADDR/PREFIX)"),
    (["board", "find", "127.0.0.1/32", "--port", "99999"], "port 99999 is outside 0..65535"),
    (["board", "find", "127.0.0.1/32", "--port", "0"], "port 0 names no board's host link"),
])
def test_bad_arguments_exit_2_with_one_line(args, message, tmp_path):
    result = subprocess.run(NETBLT + args, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_missing_file_is_a_clear_error(tmp_path):
    result = send(str(tmp_path / "nope"), "127.0.0.1:9")
    assert result.returncode == 1 and "cannot read" in result.stderr


def test_receiver_refuses_an_open_that_asks_it_to_send(tmp_path):
    recv, port = start_recv(tmp_path)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.settimeout(10)
        peer.connect(("127.0.0.1", port))
        ask = Open(uid=1, buffer_size=14320, packet_size=1432, burst_size=5, burst_interval=40,
                   death_timer=30, max_buffers=2, data_checksum=False, write_mode=False)
        peer.send(encode(ask, peer.getsockname()[1], port))
        frame = decode(peer.recv(2048))
    assert isinstance(frame.packet, Refused) and "does not send data" in frame.packet.reason
    recv.kill()
    recv.wait()


def test_a_sender_that_dies_leaves_no_output_file(tmp_path, payload):
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--death-timer", "2", "--out", str(out))
    sender = spawn(["send", str(payload), f"127.0.0.1:{port}", "--rate", "4M"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert "receiving payload.bin" in recv.stderr.readline()
    time.sleep(0.5)
    sender.kill()
    sender.wait()
    stdout, stderr = recv.communicate(timeout=30)
    assert recv.returncode == 1
    # Its death timer, or sooner the ICMP error its next control packet draws.
    assert json.loads(stdout)["reason"].startswith(("death timer expired", "peer unreachable mid-transfer"))
    # Nothing that looks complete: at most the partial file and its resume record.
    assert {p.name for p in out.iterdir()} <= {"payload.bin.partial", "payload.bin.partial.resume"}


@pytest.mark.parametrize("when", ["mid-transfer", "at the end"])
def test_an_output_folder_removed_mid_transfer_ends_in_one_line(tmp_path, payload, when):
    """Removed while buffers still come (the resume record cannot be written), or just
    before the last (the file cannot be moved into place): a line for each, no traceback,
    and no claim that the data was kept."""
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out))
    sender = spawn(["send", str(payload), f"127.0.0.1:{port}", "--rate", "4M"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, text=True)
    written = 2_900_000 if when == "at the end" else 500_000
    until(lambda: any(p.name.endswith(".partial") and p.stat().st_size >= written for p in out.iterdir()),
          f"{written} bytes in the partial file")
    shutil.rmtree(out)
    stdout, stderr = recv.communicate(timeout=60)
    sender.wait(timeout=60)
    assert recv.returncode == 1 and not re.search(r"Traceback|\w+Error\b", stderr), stderr
    assert "No such file or directory" in json.loads(stdout)["reason"] + json.loads(stdout).get("note", "")
    assert stderr.count("\n") <= 3 and "the partial data could not be kept" in stderr, stderr  # no false "kept"


def test_disk_full_fails_the_receive_and_quits_the_sender(tmp_path, payload, monkeypatch, capsys):
    def full(fd, data, offset):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(files.os, "pwrite", full)
    port = free_port()
    codes = {}
    receiver = threading.Thread(target=lambda: codes.setdefault(
        "recv", main(["recv", "--listen", f"127.0.0.1:{port}", "--out", str(tmp_path / "o.bin")])))
    receiver.start()
    time.sleep(0.5)
    sent = send(str(payload), f"127.0.0.1:{port}")
    receiver.join(timeout=60)
    assert codes["recv"] == 1 and sent.returncode == 1
    assert "No space left on device" in sent.stderr  # the receiver's QUIT reason reaches the sender
    assert "No space left on device" in capsys.readouterr().err
    assert not list(tmp_path.glob("o.bin*"))


@pytest.mark.skipif(os.geteuid() != 0, reason="native IP needs root")
def test_native_ip_protocol_30(tmp_path, payload):
    port = 30000 + os.getpid() % 20000
    recv = spawn(["recv", "--transport", "ip", "--listen", f"127.0.0.1:{port}",
                                      "--json", "--out", "ip.bin"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert "waiting" in recv.stderr.readline()
    sent = send(str(payload), f"127.0.0.1:{port}", "--transport", "ip", "--json")
    stdout, _ = recv.communicate(timeout=60)
    assert sent.returncode == 0, sent.stderr
    assert json.loads(stdout)["ok"] and json.loads(sent.stdout)["packet_size"] == 1456
    assert (tmp_path / "ip.bin").read_bytes() == payload.read_bytes()


def test_native_ip_without_privilege_is_one_clear_error(monkeypatch, capsys):
    real_socket = transport.socket.socket

    def unprivileged(family=-1, kind=-1, proto=-1, *args):
        if kind == socket.SOCK_RAW:
            raise PermissionError(1, "Operation not permitted")
        return real_socket(family, kind, proto, *args)

    monkeypatch.setattr(transport.socket, "socket", unprivileged)
    assert main(["recv", "--transport", "ip", "--listen", "127.0.0.1:0"]) == 1
    err = capsys.readouterr().err
    assert "needs a raw socket" in err and err.count("\n") == 1


def test_a_receiver_that_dies_is_named_as_such_at_the_sender(tmp_path, payload):
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "copy.bin"))
    sender = spawn(["send", str(payload), f"127.0.0.1:{port}", "--rate", "4M"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "receiving payload.bin" in recv.stderr.readline()
    time.sleep(0.5)
    recv.kill()
    recv.wait()
    _, stderr = sender.communicate(timeout=60)
    assert sender.returncode == 1
    assert "peer unreachable mid-transfer (port unreachable): the peer's program stopped" in stderr


def test_a_sender_without_an_answer_says_it_is_connecting(payload):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        port = silent.getsockname()[1]
        sender = spawn(["send", str(payload), f"127.0.0.1:{port}"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = [sender.stderr.readline().rstrip("\n")]
        while "try 2" not in lines[-1] and lines[-1]:
            lines.append(sender.stderr.readline().rstrip("\n"))
        sender.send_signal(signal.SIGINT)
        _, stderr = sender.communicate(timeout=30)
    assert sender.returncode == 130
    lines += stderr.splitlines()
    assert lines[0] == f"netblt: connecting to 127.0.0.1:{port} ..."  # at once: the file is hashed as it goes
    assert any(re.search(r"no answer yet, try 2 \(giving up in (29|30) s\)$", line) for line in lines)  # death timer 30 s


def test_silence_from_the_peer_is_reported_within_seconds(tmp_path, payload):
    recv, port = start_recv(tmp_path, "--death-timer", "12", "--out", str(tmp_path / "copy.bin"))
    sender = spawn(["send", str(payload), f"127.0.0.1:{port}", "--rate", "4M"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "receiving payload.bin" in recv.stderr.readline()
    sender.send_signal(signal.SIGSTOP)
    started = time.monotonic()
    line = recv.stderr.readline()
    waited = time.monotonic() - started
    sender.send_signal(signal.SIGCONT)
    assert line.startswith("netblt: no packets from the peer for 5 s; giving up in 7 s"), line
    assert waited < 8
    sender.communicate(timeout=60)
    (report,), _ = finish(recv)
    assert sender.returncode == 0 and report["ok"]  # the peer came back in time


def test_a_busy_receiver_refuses_a_second_sender_with_a_reason(tmp_path, payload):
    out = tmp_path / "out"
    out.mkdir()
    other = tmp_path / "other.bin"
    other.write_bytes(b"second")
    recv, port = start_recv(tmp_path, "--out", str(out))
    first = spawn(["send", str(payload), f"127.0.0.1:{port}", "--rate", "8M"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "receiving payload.bin" in recv.stderr.readline()
    second = send(str(other), f"127.0.0.1:{port}", timeout=30)
    assert second.returncode == 1
    assert "refused by peer: busy with another transfer; try again when it ends" in second.stderr
    first.communicate(timeout=60)
    (report,), _ = finish(recv)
    assert first.returncode == 0 and report["ok"] and not (out / "other.bin").exists()


def test_a_stream_from_standard_input_to_standard_output(tmp_path):
    data = os.urandom(2_000_003)
    port = free_port()
    recv = spawn(["recv", "--listen", f"127.0.0.1:{port}", "--out", "-", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert b"waiting for a sender" in recv.stderr.readline()
    sender = spawn(["send", "-", f"127.0.0.1:{port}", "--name", "piped.bin", "--json"],
                              stdin=_pipe_with(data), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    received, stderr = recv.communicate(timeout=60)  # read as it comes, as a consumer of the data would
    stdout, sender_stderr = sender.communicate(timeout=60)
    assert sender.returncode == 0 and recv.returncode == 0, sender_stderr + stderr.decode()
    assert received == data  # the trailer with length and digest is checked, never written out
    (s,) = reports(stdout)
    (r,) = reports(stderr.decode())  # with the data on stdout, reports go to stderr
    assert s["ok"] and r["ok"] and s["bytes"] == r["bytes"] == len(data) and r["name"] == "piped.bin"
    assert s["sha256"] == r["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_pipe_path_is_sent_as_a_stream(tmp_path):
    data = os.urandom(700_001)
    fifo = tmp_path / "from-a-command"
    os.mkfifo(fifo)
    threading.Thread(target=fifo.write_bytes, args=(data,), daemon=True).start()
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "got.bin"))
    sent = send(str(fifo), f"127.0.0.1:{port}")
    (r,), _ = finish(recv)
    assert sent.returncode == 0 and r["ok"], sent.stderr
    assert (tmp_path / "got.bin").read_bytes() == data


def _pipe_with(data: bytes) -> int:
    """A pipe's read end that yields ``data`` (written by a thread), for a child's stdin."""
    read, write = os.pipe()

    def writer():
        with os.fdopen(write, "wb") as f:
            f.write(data)

    threading.Thread(target=writer, daemon=True).start()
    return read


def test_several_files_and_a_directory_arrive_under_their_relative_names(tmp_path):
    src = tmp_path / "src"
    (src / "photos" / "2024").mkdir(parents=True)
    (src / "photos" / ".git").mkdir()
    files = {"photos/a.jpg": os.urandom(300_000), "photos/2024/my report é.bin": os.urandom(999),
             "photos/2024/empty": b""}
    for name, data in files.items():
        (src / name).write_bytes(data)
    (src / "photos" / ".hidden").write_text("x")
    (src / "photos" / ".git" / "config").write_text("y")
    (src / "photos" / "link").symlink_to("/etc/hostname")
    single = src / "single.txt"
    single.write_text("one")
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out))
    sent = send(str(single), str(src / "photos"), f"127.0.0.1:{port}", "--json")
    got, _ = finish(recv)
    assert sent.returncode == 0 and recv.returncode == 0, sent.stderr
    assert [r["name"] for r in got] == ["single.txt", "photos/a.jpg", "photos/2024/empty",
                                        "photos/2024/my report é.bin"] and all(r["ok"] for r in got)
    for name, data in {**files, "single.txt": b"one"}.items():
        assert (out / name).read_bytes() == data
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(
        [*files, "single.txt"])
    for skipped in (".git/: hidden", ".hidden: hidden", "link: a symlink"):
        assert skipped in sent.stderr  # announced, not silently lost


def test_a_receiver_serves_transfer_after_transfer_until_interrupted(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out), "--keep-serving")
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(os.urandom(100_000 + i))
        assert send(str(tmp_path / f"f{i}"), f"127.0.0.1:{port}").returncode == 0
    recv.send_signal(signal.SIGINT)
    got, _ = finish(recv)
    assert recv.returncode == 130 and [r["name"] for r in got] == ["f0", "f1", "f2"]
    assert all((out / f"f{i}").read_bytes() == (tmp_path / f"f{i}").read_bytes() for i in range(3))


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6")
def test_ipv6_addresses_in_brackets(tmp_path, payload):
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "v6.bin"), host="::1")
    sent = send(str(payload), f"[::1]:{port}", "--json")
    (r,), _ = finish(recv)
    assert sent.returncode == 0 and r["ok"] and r["peer"].startswith("[::1]:")
    assert (tmp_path / "v6.bin").read_bytes() == payload.read_bytes()
    assert r["packet_size"] == 1428  # IPv6's 40-byte header: 1500-byte datagrams, not 1520


def test_quiet_prints_nothing_and_version_prints_the_version(tmp_path, payload):
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "q.bin"))
    sent = send(str(payload), f"127.0.0.1:{port}", "-q")
    finish(recv)
    assert sent.returncode == 0 and sent.stdout == sent.stderr == ""
    version = subprocess.run(NETBLT + ["--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("netblt 0.")


def test_buffers_smaller_than_a_packet_are_sent_with_a_note(tmp_path):
    small = tmp_path / "small.bin"
    small.write_bytes(os.urandom(2500))
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "copy.bin"))
    sent = send(str(small), f"127.0.0.1:{port}", "--buffer-size", "1000")
    finish(recv)
    assert sent.returncode == 0, sent.stderr
    assert "--buffer-size 1000 is under one 1448-byte packet" in sent.stderr
    assert (tmp_path / "copy.bin").read_bytes() == small.read_bytes()


def test_the_progress_bar_speaks_bits_per_second():
    bar = Progress()
    bar.add_task("x", total=100)
    (task,) = bar.tasks
    task.finished_speed = 1.25e6  # bytes per second
    assert str(BitRateColumn().render(task)) == "10.0 Mb/s"


@pytest.mark.parametrize("args, message", [
    (["--delay", "100"], "duration '100' needs a unit: 100ms or 100s"),
    (["--rate", "fast"], "bad rate 'fast'"),
    (["--loss", "2"], "probability '2' is outside 0..1"),
])
def test_netem_arguments_have_units_and_errors_go_to_stderr(args, message):
    result = subprocess.run(NETBLT + ["netem", "--listen", "127.0.0.1:0", "--forward", "127.0.0.1:9", *args],
                            capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr and result.stdout == ""


def test_netem_says_what_it_does_in_words():
    result = subprocess.run(NETBLT + ["netem", "--listen", "127.0.0.1:0", "--forward", "127.0.0.1:9",
                                      "--rate", "100M", "--delay", "10ms", "--loss", "1%", "--duration", "0.1s"],
                            capture_output=True, text=True, timeout=30)
    first = result.stdout.splitlines()[0]
    assert result.returncode == 0 and "PathConfig" not in first
    assert first.endswith("delay 10 ms, loss 1%, rate 100 Mb/s, queue 1048576 bytes"), first
    assert result.stdout.splitlines()[1:] == ["forward: nothing relayed", "backward: nothing relayed"], result.stdout
    helped = subprocess.run(NETBLT + ["netem", "--help"], capture_output=True, text=True).stdout
    described = helped.split("options:", 1)[1]
    for option in ("--duplicate", "--seed", "--corrupt", "--queue"):
        assert "(default:" in described.split(f"  {option}", 1)[1].split("\n  --", 1)[0], option


def test_a_receiver_waiting_for_the_rest_of_a_session_gives_up_after_its_death_timer(tmp_path):
    (tmp_path / "first").write_bytes(b"one")
    never = tmp_path / "never"
    os.mkfifo(never)  # nobody writes to it: the sender stalls before its second OPEN
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out), "--death-timer", "2")
    sender = spawn(["send", str(tmp_path / "first"), str(never), f"127.0.0.1:{port}"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got, stderr = finish(recv, timeout=30)
    finally:
        sender.kill()  # still stalled on the pipe nobody writes to
        sender.communicate()
    assert recv.returncode == 1
    assert [r["ok"] for r in got] == [True, False]
    assert got[1]["reason"] == "the sender's next file did not come within 2 s"
    assert (out / "first").read_bytes() == b"one"
