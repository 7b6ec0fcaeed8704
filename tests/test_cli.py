"""The ``netblt`` command end to end: real processes, real sockets, loopback only."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from netblt.driver import transport
from netblt.host import files
from netblt.host.cli import main
from netblt.host.codec import decode, encode
from netblt.host.packets import Open, Refused

NETBLT = [sys.executable, "-m", "netblt.host.cli"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_recv(tmp_path: Path, *args: str, port: int | None = None) -> tuple[subprocess.Popen, int]:
    port = port or free_port()
    proc = subprocess.Popen(NETBLT + ["recv", "--listen", f"127.0.0.1:{port}", "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    line = proc.stderr.readline()
    assert "waiting for a sender" in line, line
    return proc, port


def send(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(NETBLT + ["send", *args], capture_output=True, text=True, timeout=timeout)


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
    assert s["sha256"] == r["sha256"]
    assert (out / "payload.bin").read_bytes() == payload.read_bytes()
    assert not list(out.glob("*.partial"))


def test_send_through_the_relay_with_loss_and_delay(tmp_path, payload):
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "copy.bin"))
    relay_port = free_port()
    relay = subprocess.Popen(NETBLT + ["netem", "--listen", f"127.0.0.1:{relay_port}", "--forward",
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
    assert (tmp_path / "copy.bin").read_bytes() == payload.read_bytes()


def test_no_receiver_is_one_clear_error(payload):
    result = send(str(payload), f"127.0.0.1:{free_port()}", timeout=30)
    assert result.returncode == 1
    assert "peer unreachable" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["send", "x", "127.0.0.1", "--rate", "fast"], "bad rate 'fast'"),
    (["send", "x", "127.0.0.1", "--buffers", "0"], "must be at least 1"),
    (["send", "x", "127.0.0.1", "--rate", "1G", "--burst-size", "5"], "not both"),
    (["send", "x", "127.0.0.1", "--packet-size", "70000"], "packet size 70000 is outside"),
    (["send", "x", "127.0.0.1", "--transport", "tcp"], "invalid choice"),
    (["recv", "--listen", "127.0.0.1:99999"], "port 99999 is outside"),
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
    sender = subprocess.Popen(NETBLT + ["send", str(payload), f"127.0.0.1:{port}", "--rate", "4M"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    sender.kill()
    sender.wait()
    stdout, stderr = recv.communicate(timeout=30)
    assert recv.returncode == 1
    # Its death timer, or sooner the ICMP error its next control packet draws.
    assert json.loads(stdout)["reason"].startswith(("death timer expired", "peer unreachable"))
    assert not list(out.iterdir())


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
    recv = subprocess.Popen(NETBLT + ["recv", "--transport", "ip", "--listen", f"127.0.0.1:{port}",
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
