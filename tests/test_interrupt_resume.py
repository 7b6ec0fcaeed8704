"""Interrupted transfers keep what arrived, and the same send resumes (issue 12, item 6)."""

import hashlib
import json
import os
import signal
import subprocess

import pytest
from clitools import finish, placing_slowly, send, spawn, start_recv, until

from netblt.host.announce import Announcement
from netblt.host.files import Expectation, FileSink

SIZE = 3_000_000
SLOW = ["--rate", "8M", "--buffer-size", "64K"]  # about 3 s for the file, 46 buffers


@pytest.fixture
def setup(tmp_path):
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(SIZE))
    out = tmp_path / "out"
    out.mkdir()
    return source, out


def interrupted(tmp_path, source, out, who: str, how: signal.Signals) -> tuple[int, int, str, str]:
    """Start a slow transfer, signal one end once data has come (the receiver's first resume
    record, a second in); exit codes and stderr of both ends."""
    recv, port = start_recv(tmp_path, "--out", str(out))
    sender = spawn(["send", str(source), f"127.0.0.1:{port}", *SLOW],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_record(out)
    (recv if who == "receiver" else sender).send_signal(how)
    _, send_err = sender.communicate(timeout=60)
    _, recv_err = finish(recv)
    return recv.returncode, sender.returncode, recv_err, send_err


def first_record(out) -> None:
    until(lambda: (out / "big.bin.partial.resume").exists(), "the receiver's first resume record")


def resume(tmp_path, source, out) -> dict:
    recv, port = start_recv(tmp_path, "--out", str(out))
    result = send(str(source), f"127.0.0.1:{port}", *SLOW[2:])
    (report,), _ = finish(recv)
    assert result.returncode == 0, result.stderr
    return report


def kept(out, source) -> int:
    record = json.loads((out / "big.bin.partial.resume").read_text())
    assert (record["size"], record["sha256"], record["modified"]) == (SIZE, None, source.stat().st_mtime_ns)
    return sum(end - start for start, end in record["ranges"])


@pytest.mark.parametrize("who, how, code", [("receiver", signal.SIGINT, 130), ("sender", signal.SIGINT, 130),
                                            ("receiver", signal.SIGTERM, 143), ("sender", signal.SIGTERM, 143)])
def test_a_signal_tells_the_peer_keeps_the_partial_file_and_the_same_send_resumes(
        tmp_path, setup, who, how, code):
    source, out = setup
    recv_code, send_code, recv_err, send_err = interrupted(tmp_path, source, out, who, how)
    name = how.name
    if who == "receiver":
        assert (recv_code, send_code) == (code, 1)
        assert f"send failed: aborted by peer: interrupted ({name})" in send_err
    else:
        assert (recv_code, send_code) == (1, code)
        assert f"recv failed: aborted by peer: interrupted ({name})" in recv_err
    assert sorted(p.name for p in out.iterdir()) == ["big.bin.partial", "big.bin.partial.resume"]
    held = kept(out, source)
    assert 0 < held < SIZE and f"kept {held} of {SIZE} bytes in big.bin.partial" in recv_err
    report = resume(tmp_path, source, out)
    assert report["ok"] and report["resumed_bytes"] == held and report["bytes"] == SIZE - held
    assert (out / "big.bin").read_bytes() == source.read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["big.bin"]


def test_a_signal_as_the_received_file_is_put_in_place_waits_for_it(tmp_path, setup):
    """The sender has heard that all is well: a receiver stopped as it syncs the file and
    moves it into place does that first, and reports it (it once left the whole file as
    .partial with no resume record, reported nowhere)."""
    source, out = setup
    env, placing = placing_slowly(tmp_path, 1)
    recv, port = start_recv(tmp_path, "--out", str(out), env=env)
    sent = send(str(source), f"127.0.0.1:{port}")
    assert sent.returncode == 0, sent.stderr
    until(placing.exists, "the receiver putting the file in place")
    recv.send_signal(signal.SIGTERM)
    (report,), err = finish(recv)
    assert recv.returncode == 143 and "interrupted (SIGTERM)" in err, err
    assert report["ok"] and report["bytes"] == SIZE
    assert sorted(p.name for p in out.iterdir()) == ["big.bin"] and (out / "big.bin").read_bytes() == source.read_bytes()


def test_a_killed_receiver_leaves_what_it_synced_and_the_next_run_resumes(tmp_path, setup):
    source, out = setup
    recv, port = start_recv(tmp_path, "--out", str(out))
    sender = spawn(["send", str(source), f"127.0.0.1:{port}", *SLOW],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_record(out)
    recv.kill()
    recv.wait()
    sender.communicate(timeout=60)
    held = kept(out, source)  # written at least once a second while data arrives
    assert held > 0
    report = resume(tmp_path, source, out)
    assert report["ok"] and report["resumed_bytes"] >= held
    assert (out / "big.bin").read_bytes() == source.read_bytes()


def test_a_partial_file_of_other_data_is_replaced_not_resumed(tmp_path, setup):
    source, out = setup
    interrupted(tmp_path, source, out, "receiver", signal.SIGINT)
    source.write_bytes(os.urandom(SIZE))  # the file changed since
    report = resume(tmp_path, source, out)
    assert report["ok"] and report["resumed_bytes"] == 0 and report["bytes"] == SIZE
    assert "an older partial file of different data was overwritten" in report["note"]
    assert (out / "big.bin").read_bytes() == source.read_bytes()


def test_a_file_changed_in_place_with_its_size_and_time_kept_fails_its_check(tmp_path, setup):
    """Resume trusts size and modification time (the digest comes only at the end); when a
    file changes under both, the trailer's digest catches the old data resumed."""
    source, out = setup
    interrupted(tmp_path, source, out, "receiver", signal.SIGINT)
    assert kept(out, source) > 0
    stat = source.stat()
    with open(source, "r+b") as f:
        f.write(b"\x00" * 1000)  # inside buffer 1, which the receiver holds
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    recv, port = start_recv(tmp_path, "--out", str(out))
    result = send(str(source), f"127.0.0.1:{port}", *SLOW[2:])
    (report,), _ = finish(recv)
    assert report["resumed_bytes"] > 0 and not report["ok"] and report["reason"].startswith("SHA-256 mismatch")
    assert result.returncode == 1
    assert not any(out.iterdir())  # nothing that looks complete, nothing to resume from


def test_a_damaged_partial_file_fails_the_check_and_is_not_kept(tmp_path, setup):
    source, out = setup
    interrupted(tmp_path, source, out, "receiver", signal.SIGINT)
    with open(out / "big.bin.partial", "r+b") as f:
        f.seek(1000)
        f.write(b"\xff" * 10)
    recv, port = start_recv(tmp_path, "--out", str(out))
    result = send(str(source), f"127.0.0.1:{port}", *SLOW[2:])
    (report,), _ = finish(recv)
    assert not report["ok"] and report["reason"].startswith("SHA-256 mismatch")
    assert result.returncode == 1 and "send failed: peer quit: SHA-256 mismatch" in result.stderr
    assert not any(out.iterdir())  # nothing that looks complete, nothing to resume from
    report = resume(tmp_path, source, out)
    assert report["ok"] and (out / "big.bin").read_bytes() == source.read_bytes()


def test_the_resume_record_claims_only_data_already_on_disk(tmp_path, monkeypatch):
    """A power cut keeps what was synced and loses the rest of the page cache (a killed
    process cannot show this: the kernel still writes its cache). So whenever the record
    is replaced, every buffer it claims was synced to the partial file before."""
    data = os.urandom(3000)
    announced = Announcement("f", len(data), hashlib.sha256(data).hexdigest())
    root = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    sink = FileSink(root, "f", Expectation(announced), 1000)
    cached, on_disk, claimed = set(), set(), []
    pwrite, replace = os.pwrite, os.replace

    def cached_write(fd, chunk, offset):
        if fd == sink.fd:
            cached.add(offset)
        return pwrite(fd, chunk, offset)

    def sync(fd):
        if fd == sink.fd:
            on_disk.update(cached)

    def recorded(source, target, **kwargs):
        replace(source, target, **kwargs)
        if target == sink.record:
            ranges = json.loads((tmp_path / sink.record).read_text())["ranges"]
            claimed.append({offset for a, b in ranges for offset in range(a, b, 1000)} - on_disk)

    monkeypatch.setattr(os, "pwrite", cached_write)
    monkeypatch.setattr(os, "fdatasync", sync)
    monkeypatch.setattr(os, "replace", recorded)
    for offset in (0, 1000, 2000):
        sink.write(offset, memoryview(data)[offset:offset + 1000])
        sink.save_record()
    os.close(root)
    assert claimed == [set(), set(), set()]


def test_a_signal_held_back_hurries_the_block_and_acts_after_it():
    """What a receiver does once its connection is over runs to its end under a signal
    (placing the file), told to hurry (a board's data path then waits on its board no
    longer than a moment: the report reads its counters), and the signal acts after."""
    from netblt.host.signals import stops_deferred
    from netblt.host.transfer import Interrupted

    def stop(signum: int, frame: object) -> None:
        raise Interrupted(143, "SIGTERM")

    hurried: list[bool] = []
    seen: list[list[bool]] = []
    before = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(Interrupted):
            with stops_deferred(lambda: hurried.append(True)):
                os.kill(os.getpid(), signal.SIGTERM)
                seen.append(list(hurried))  # the block goes on
    finally:
        signal.signal(signal.SIGTERM, before)
    assert seen == [[True]] and hurried == [True]
