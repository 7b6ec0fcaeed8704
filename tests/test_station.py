"""A receiving station (host/station.py): ``netblt recv --keep-serving`` serving several
senders at once, each in a process of its own, and what one sender does kept from the
others: a stall, an abort, a hostile spray, a file too large for the disk, its process's
crash. Real processes on loopback."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import Pipe
from pathlib import Path

import pytest
from clitools import NETBLT, finish, free_port, opening, placing_slowly, send, send_open, spawn, start_recv, until

from netblt.driver.control_codec import ControlCodec
from netblt.driver.transport import Transport, show
from netblt.host.announce import Announcement
from netblt.host.files import Expectation, FileError, FileSink
from netblt.host.station import HELD_MOST, Sender, Station, refusal_kind
from netblt.protocol.codec import encode
from netblt.protocol.packets import Abort

SLOW = "8M"
"""A rate that keeps a 2 MB transfer going some 2 s: long enough to overlap the others."""


def files(folder: Path, count: int, size: int) -> list[Path]:
    folder.mkdir(exist_ok=True)
    made = []
    for i in range(count):
        path = folder / f"f{i}.bin"
        path.write_bytes(os.urandom(size + i))
        made.append(path)
    return made


def sender(path: Path, port: int, *args: str) -> subprocess.Popen:
    return spawn(["send", str(path), f"127.0.0.1:{port}", "--json", *args], stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True)


def station(tmp_path: Path, *args: str, **popen) -> tuple[subprocess.Popen, int, Path]:
    out = tmp_path / "in"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", f"{out}/", "--keep-serving", *args, **popen)
    return recv, port, out


def stop(recv: subprocess.Popen) -> tuple[list[dict], str]:
    recv.send_signal(signal.SIGTERM)
    got, err = finish(recv)
    assert recv.returncode == 143, err
    return got, err


def intact(sent: list[Path], out: Path) -> bool:
    return all((out / path.name).read_bytes() == path.read_bytes() for path in sent)


@contextmanager
def listener() -> Iterator[Station]:
    """A station's listener alone, in this process: its socket on a loopback port, no
    sender's process started, nothing heard yet."""
    station = Station.__new__(Station)
    station._listener = Transport("udp", ("127.0.0.1", 0), share="open")
    station._codec = ControlCodec(station._listener.local_port)
    station.senders, station.dropped, station.metrics, station._buf = {}, Counter(), None, bytearray(1 << 16)
    try:
        yield station
    finally:
        station._listener.close()


def test_eight_senders_at_once_each_intact_with_its_own_report(tmp_path):
    sent = files(tmp_path / "src", 8, 2_000_000)
    recv, port, out = station(tmp_path)
    senders = [sender(path, port, "--rate", SLOW) for path in sent]
    for proc in senders:
        _, said = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"a sender: {said}\nthe station: {stop(recv)[1]}"
    got, err = stop(recv)
    assert sorted(r["name"] for r in got) == sorted(p.name for p in sent) and all(r["ok"] for r in got)
    assert len({r["peer"] for r in got}) == 8 and "refused" not in err
    assert intact(sent, out)


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6")
def test_a_station_on_every_address_serves_ipv4_and_ipv6_senders_at_once(tmp_path):
    sent = files(tmp_path / "src", 2, 2_000_000)
    out = tmp_path / "in"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", f"{out}/", "--keep-serving", host="::")  # IPv6 and IPv4 together
    senders = [spawn(["send", str(path), where, "--json", "--rate", SLOW], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
               for path, where in zip(sent, (f"127.0.0.1:{port}", f"[::1]:{port}"))]
    for proc in senders:
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    got, _ = stop(recv)
    assert sorted(r["peer"].rsplit(":", 1)[0] for r in got) == ["127.0.0.1", "[::1]"]
    assert all(r["ok"] for r in got) and intact(sent, out)


def test_past_its_limit_a_station_refuses_an_open_with_the_reason(tmp_path):
    first, second = files(tmp_path / "src", 2, 2_000_000)
    recv, port, out = station(tmp_path, "--max-senders", "1")
    running = sender(first, port, "--rate", SLOW)
    assert "receiving f0.bin" in recv.stderr.readline()
    refused = sender(second, port)
    _, err = refused.communicate(timeout=60)
    assert refused.returncode == 1
    assert "busy: serving 1 sender at once, its limit (--max-senders); try again when one ends" in err
    running.communicate(timeout=60)
    got, _ = stop(recv)
    assert [r["name"] for r in got] == ["f0.bin"] and got[0]["ok"] and not (out / "f1.bin").exists()


def test_a_stalled_sender_holds_up_no_other(tmp_path):
    stalled_file, *others_files = files(tmp_path / "src", 3, 2_000_000)
    recv, port, out = station(tmp_path)
    stalled = sender(stalled_file, port, "--rate", SLOW)
    assert "receiving f0.bin" in recv.stderr.readline()
    stalled.send_signal(signal.SIGSTOP)  # mid-transfer: its receiver waits, as for a lost path
    try:
        others = [sender(path, port, "--rate", SLOW) for path in others_files]
        for proc in others:
            proc.communicate(timeout=60)
            assert proc.returncode == 0
        assert stalled.poll() is None
    finally:
        stalled.send_signal(signal.SIGCONT)
    stalled.communicate(timeout=60)
    assert stalled.returncode == 0  # it came back within its death timer and finished
    got, _ = stop(recv)
    assert all(r["ok"] for r in got) and intact([stalled_file, *others_files], out)


def test_a_sender_that_aborts_fails_alone(tmp_path):
    aborting_file, *others_files = files(tmp_path / "src", 3, 2_000_000)
    recv, port, out = station(tmp_path)
    others = [sender(path, port, "--rate", SLOW) for path in others_files]
    aborting = sender(aborting_file, port, "--rate", SLOW)
    for _ in range(3):
        assert "receiving" in recv.stderr.readline()
    time.sleep(0.3)
    aborting.send_signal(signal.SIGINT)  # it tells the station with ABORT
    aborting.communicate(timeout=30)
    for proc in others:
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    got, _ = stop(recv)
    by_name = {r["name"]: r for r in got}
    assert not by_name["f0.bin"]["ok"] and "aborted by peer" in by_name["f0.bin"]["reason"]
    assert by_name["f1.bin"]["ok"] and by_name["f2.bin"]["ok"] and intact(others_files, out)
    assert not (out / "f0.bin").exists()


def test_a_hostile_spray_at_the_port_disturbs_no_transfer(tmp_path):
    sent = files(tmp_path / "src", 2, 2_000_000)
    recv, port, out = station(tmp_path)
    senders = [sender(path, port, "--rate", SLOW) for path in sent]
    spray = random.Random(7)
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(8)]
    try:
        until = time.monotonic() + 2
        while time.monotonic() < until:
            for s in sockets:  # garbage, NETBLT-looking headers of every kind, truncated packets
                body = bytes([spray.randrange(0, 16)]) + spray.randbytes(spray.choice((0, 3, 23, 24, 200, 1400)))
                s.sendto(body, ("127.0.0.1", port))
            time.sleep(0.001)
    finally:
        for s in sockets:
            s.close()
    for proc in senders:
        proc.communicate(timeout=60)
        assert proc.returncode == 0
    got, err = stop(recv)
    assert len(got) == 2 and all(r["ok"] for r in got) and intact(sent, out)
    assert "Traceback" not in err


def test_what_a_sender_says_before_its_process_is_ready_reaches_that_process(tmp_path):
    """An ABORT sent right behind the OPEN reaches the station's listener, before the
    process started for that sender has its own socket: it is handed on, and ends the
    connection at once (else the process would wait out its death timer)."""
    recv, port, _ = station(tmp_path)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.bind(("127.0.0.1", 0))
        send_open(peer, port, 5, "early.bin")
        peer.sendto(encode(Abort("changed my mind"), peer.getsockname()[1], port), ("127.0.0.1", port))
        said = recv.stderr.readline() + recv.stderr.readline()
    assert "receiving early.bin" in said and "aborted by peer: changed my mind" in said, said
    got, _ = stop(recv)
    assert [r["reason"] for r in got] == ["aborted by peer: changed my mind"]


def test_a_refusal_that_draws_an_icmp_error_leaves_the_station_serving(tmp_path):
    """A REFUSED sent to a port closed since comes back as ICMP port unreachable, which the
    listener's socket reports at its next read."""
    (sent,) = files(tmp_path / "src", 1, 100_000)
    recv, port, out = station(tmp_path, "--allow", "127.0.0.1/32")
    for _ in range(3):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
            stranger.bind(("127.0.0.2", 0))
            send_open(stranger, port, 9, "x")
        assert "is not allowed to send here" in recv.stderr.readline()
    welcome = sender(sent, port)
    welcome.communicate(timeout=60)
    assert welcome.returncode == 0
    got, err = stop(recv)
    assert [r["ok"] for r in got] == [True] and intact([sent], out) and "Traceback" not in err


def test_a_sender_process_that_dies_is_reported_and_the_station_serves_on(tmp_path):
    doomed_file, later_file = files(tmp_path / "src", 2, 2_000_000)
    recv, port, out = station(tmp_path)
    doomed = sender(doomed_file, port, "--rate", SLOW, "--death-timer", "3")
    assert "receiving f0.bin" in recv.stderr.readline()
    serving = [int(pid) for pid in subprocess.run(["pgrep", "-f", "netblt-recv|forkserver"], capture_output=True,
                                                  text=True).stdout.split()]
    children = [pid for pid in serving if _parent(_parent(pid)) == recv.pid or _parent(pid) == recv.pid]
    workers = [pid for pid in children if _parent(pid) != recv.pid]
    assert len(workers) == 1, children
    os.kill(workers[0], signal.SIGKILL)
    doomed.communicate(timeout=60)
    assert doomed.returncode == 1  # its receiver went silent
    later = sender(later_file, port)
    later.communicate(timeout=60)
    assert later.returncode == 0
    got, _ = stop(recv)
    assert [r["ok"] for r in got] == [False, True]
    assert "ended unexpectedly (exit status -9)" in got[0]["reason"] and intact([later_file], out)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small file system needs root")
def test_a_file_larger_than_the_disk_is_refused_and_the_others_are_not_disturbed(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(small)], check=True)
    try:
        out = small / "in"
        out.mkdir()
        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(12_000_000))
        sent = files(tmp_path / "src", 2, 2_000_000)
        recv, port = start_recv(tmp_path, "--out", f"{out}/", "--keep-serving")
        senders = [sender(path, port, "--rate", SLOW) for path in sent]
        too_big = sender(big, port)
        _, err = too_big.communicate(timeout=60)
        assert too_big.returncode == 1 and "no room for big.bin at the receiver: 12000000 bytes" in err
        for proc in senders:
            proc.communicate(timeout=60)
            assert proc.returncode == 0
        got, _ = stop(recv)
        assert sorted(r["name"] for r in got) == ["f0.bin", "f1.bin"] and intact(sent, out)
        assert sorted(os.listdir(out)) == ["f0.bin", "f1.bin"]  # no partial file left of the refused one
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_sigterm_ends_a_station_and_every_transfer_within_a_second(tmp_path):
    sent = files(tmp_path / "src", 2, 4_000_000)
    recv, port, out = station(tmp_path)
    senders = [sender(path, port, "--rate", SLOW) for path in sent]
    for _ in sent:
        assert "receiving" in recv.stderr.readline()
    time.sleep(0.5)
    started = time.monotonic()
    recv.send_signal(signal.SIGTERM)
    got, err = finish(recv)
    took = time.monotonic() - started
    assert recv.returncode == 143 and took < 1.5, (took, err)
    assert len(got) == 2 and not any(r["ok"] for r in got)
    for proc in senders:
        _, said = proc.communicate(timeout=30)
        assert proc.returncode == 1 and "interrupted (SIGTERM)" in said
    assert not list(out.iterdir()) or all(name.endswith((".partial", ".resume")) for name in os.listdir(out))


def test_a_senders_process_imports_nothing_the_fork_server_could_have_loaded(tmp_path):
    """Each sender's process runs the station's main module again (multiprocessing's
    fix-up of __main__): with the CLI not loaded in the fork server first, every connection
    imported argparse and rich anew (40 ms each: 200 small files took 9.3 s, 2.7 s now).
    Python reports each import; rich.console is imported by the station and the fork
    server, and by no sender's process, which says nothing of it."""
    sent = files(tmp_path / "src", 2, 10_000)
    out = tmp_path / "in"
    out.mkdir()
    port = free_port()
    recv = spawn(["recv", "--listen", f"127.0.0.1:{port}", "--out", f"{out}/", "--keep-serving", "--json"],
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                 env=os.environ | {"PYTHONPROFILEIMPORTTIME": "1"})
    said = []
    while "waiting for a sender" not in (line := recv.stderr.readline()):
        assert line, "".join(said)
        said.append(line)
    for path in sent:
        result = send(str(path), f"127.0.0.1:{port}")
        assert result.returncode == 0, result.stderr
    got, err = stop(recv)
    assert len(got) == 2 and intact(sent, out)
    imported = [line for line in said + err.splitlines()
                if line.startswith("import time:") and line.rstrip().endswith(" rich.console")]
    assert len(imported) == 2, imported
    assert "RuntimeWarning" not in err + "".join(said)  # runpy's, about the CLI loaded before it runs it


def test_a_refusal_is_counted_by_its_kind_never_by_the_address_it_names():
    assert refusal_kind("busy: serving 8 senders at once, its limit (--max-senders); try again") == "busy"
    assert refusal_kind("that connection is over") == "over"
    assert refusal_kind(f"{show(('192.0.2.7', 40000))} is not allowed to send here") == "not allowed"
    assert refusal_kind(f"{show(('2001:db8::7', 40000))} is not allowed to send here") == "not allowed"
    assert refusal_kind("authentication failed: the proof does not match this receiver's secret") == "authentication"


def test_two_senders_of_one_name_at_once_the_second_is_refused(tmp_path):
    announced = Announcement(name="same.bin", size=10, sha256=None, modified=None)
    root = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first = FileSink(root, "same.bin", Expectation(announced), 4)
        with pytest.raises(FileError, match="same.bin is being received from another sender now"):
            FileSink(root, "same.bin", Expectation(announced), 4)
        first.close()
        FileSink(root, "same.bin", Expectation(announced), 4).close()  # free once the first let go
    finally:
        os.close(root)


def test_sigterm_ends_a_waiting_station_with_one_line(tmp_path):
    recv, _, _ = station(tmp_path)
    recv.send_signal(signal.SIGTERM)
    got, err = finish(recv)
    assert recv.returncode == 143 and not got and err.strip().splitlines()[-1] == "netblt: interrupted (SIGTERM)"


@pytest.mark.parametrize("args, message", [
    (["--max-senders", "2"], "--max-senders is for --keep-serving"),
    (["--keep-serving", "--max-senders", "2", "--out", "one.bin"], "several senders at once write into a directory"),
    (["--keep-serving", "--max-senders", "2", "--transport", "ip"], "a raw socket (--transport ip) sees every"),
    (["--keep-serving", "--max-senders", "0"], "must be at least 1"),
])
def test_max_senders_that_cannot_be_served_is_one_line(tmp_path, args, message):
    done = subprocess.run([*NETBLT, "recv", "--listen", "127.0.0.1:0", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=30)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and message in lines[-1] and "Traceback" not in done.stderr, done.stderr
    assert sum("error" in line for line in lines) == 1  # after argparse's usage, if any: one line


def test_a_signal_while_a_report_is_handled_loses_no_report():
    """SIGTERM raised as the station had taken a process's report from its channel and not
    yet printed it lost the report (a sender that ended as the station was stopped went
    unreported: test_a_sender_that_aborts_fails_alone failed so in a cold make test)."""
    from netblt.host.transfer import Interrupted, TransferReport

    class Feedback:
        printed: list[TransferReport] = []

        def report(self, report: TransferReport) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # the station is stopped just now
            self.printed.append(report)

    def stop(signum: int, frame: object) -> None:
        raise Interrupted(143, "SIGTERM")

    station = Station.__new__(Station)
    station.metrics, station.reports, station.feedback = None, [], Feedback()
    theirs, ours = Pipe()
    report = TransferReport(True, "", "receiver", name="f1.bin")
    ours.send(("report", report))
    ours.send(("done", 0))
    before = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(Interrupted):
            station._hear(Sender(0, ("127.0.0.1", 1), 0, None, theirs))  # type: ignore[arg-type]
    finally:
        signal.signal(signal.SIGTERM, before)
    assert station.feedback.printed == [report] and station.reports == [report]


def test_a_signal_as_a_senders_process_reports_its_end_loses_no_report(monkeypatch):
    """SIGTERM passed on by a stopping station just after the process's connection was over
    ended the process unreported (exit status 1): the station then told of a process that
    ended unexpectedly beside the transfer's own report (seen in CI)."""
    from netblt.driver.transport import TransportError
    from netblt.host import station
    from netblt.host.transfer import Options

    class Channel:
        said: list[tuple] = []

        def send(self, message: tuple) -> None:
            if message[0] == "status":  # the station is stopped just as the process tells its end
                os.kill(os.getpid(), signal.SIGTERM)
            self.said.append(message)

    def no_port(*args: object, **kwargs: object) -> None:
        raise TransportError("the port is gone")

    monkeypatch.setattr(station, "Transport", no_port)
    task = station.Assignment(b"", ("127.0.0.1", 1), ("127.0.0.1", 2), socket.AF_INET, Options(None), None,
                              None, False, 1.0, False)  # type: ignore[arg-type]
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        station.serve_sender(task, Channel())  # type: ignore[arg-type]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    assert Channel.said == [("status", "cannot serve 127.0.0.1:1: the port is gone"), ("done", 1)]


def test_a_joined_socket_kept_to_its_sender_gives_up_what_others_sent_it_before():
    """Until a sender's process's socket is connected to its sender, the kernel may hand it
    any sender's datagram (SO_REUSEPORT spreads them over the port's sockets): read as
    the process's own, another sender's repeated OPEN was answered "busy" (seen under load)."""
    joined = Transport("udp", ("127.0.0.1", 0), share="open")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as ours, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as theirs:
            ours.bind(("127.0.0.1", 0))
            theirs.bind(("127.0.0.1", 0))
            theirs.sendto(b"theirs", ("127.0.0.1", joined.local_port))
            ours.sendto(b"ours", ("127.0.0.1", joined.local_port))
            early = joined.keep_to(ours.getsockname())
            assert early == [(b"theirs", theirs.getsockname()), (b"ours", ours.getsockname())]
            theirs.sendto(b"theirs, later", ("127.0.0.1", joined.local_port))  # not this socket's now
            ours.sendto(b"ours, later", ("127.0.0.1", joined.local_port))
            view, _, source = joined.receive(bytearray(100))
            assert (bytes(view), source) == (b"ours, later", ours.getsockname())
    finally:
        joined.close()


def test_an_icmp_error_that_reached_a_joined_socket_before_it_was_kept_to_its_sender_is_passed_over():
    """The kernel may bring a new socket of the port the ICMP errors its other sockets'
    datagrams draw (the port unreachable of a REFUSED the listener sent): one ended the read
    of what came before, and with it the process of the sender starting then."""
    joined = Transport("udp", ("127.0.0.1", 0), share="open")  # the port's only socket: it takes all
    try:
        joined.send([b"refused"], ("127.0.0.1", free_port()))  # nothing there: ICMP port unreachable
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
            peer.bind(("127.0.0.1", 0))
            peer.sendto(b"ours", ("127.0.0.1", joined.local_port))
            assert joined.keep_to(peer.getsockname()) == [(b"ours", peer.getsockname())]
    finally:
        joined.close()


def test_what_reached_a_senders_process_before_its_socket_was_its_own_goes_to_the_listener():
    """Another sender's datagrams that a process's socket took before it was connected come
    back with its "ready" and are handled as if the listener had read them."""
    with listener() as station:
        port = station._listener.local_port
        ready, theirs = Pipe()
        starting = ("127.0.0.1", 40001)  # a sender whose process is starting too: held for it
        station.senders[starting] = Sender(1, starting, 5, None, Pipe()[0])  # type: ignore[arg-type]
        taking = Sender(0, ("127.0.0.1", 40000), 4, None, ready)  # type: ignore[arg-type]
        station.senders[taking.source] = taking
        abort = encode(Abort("changed my mind"), 40001, port)
        stranger = encode(Abort("who?"), 40002, port)
        theirs.send(("ready", [(abort, starting), (stranger, ("127.0.0.1", 40002))]))
        station._hear(taking)
    assert theirs.recv() == [] and taking.came_since is None
    assert station.senders[starting].came_since == [abort] and station.dropped == Counter({"not an OPEN": 1})


def test_a_senders_process_answers_its_open_first_whatever_its_socket_read_before(monkeypatch):
    """A process's data path reads its socket from the moment it exists: the sender's ABORT
    read before the OPEN the listener handed over was taken for the opening, and the OPEN
    and the rest were dropped."""
    from netblt.driver.software import SoftwareDataPath
    from netblt.host import station
    from netblt.host.transfer import Options, Served
    from netblt.protocol.packets import Open

    holder = Transport("udp", ("127.0.0.1", 0), share="open")
    port = holder.local_port
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))
    given: list[list] = []

    class Channel:
        def send(self, message: tuple) -> None:
            pass

        def recv(self) -> list[bytes]:  # its socket is the sender's now: the ABORT comes to it
            peer.sendto(encode(Abort("changed my mind"), peer.getsockname()[1], port), ("127.0.0.1", port))
            return []

    class ReadFirst(SoftwareDataPath):
        def __init__(self, transport: Transport) -> None:
            super().__init__(transport)
            until(lambda: self.events, "the data path reading the ABORT")

    def serve_connection(*args: object, opening: list, **kwargs: object) -> Served:
        given.append(list(opening))
        return Served(None, [], None, None)

    monkeypatch.setattr(station, "SoftwareDataPath", ReadFirst)
    monkeypatch.setattr(station, "serve_connection", serve_connection)
    task = station.Assignment(encode(opening(5, "early.bin"), peer.getsockname()[1], port), peer.getsockname(),
                              ("127.0.0.1", port), socket.AF_INET, Options(None), None, None, False, 1.0,
                              False)  # type: ignore[arg-type]
    try:
        assert station._serve_on_own_socket(task, Channel(), None) == 0  # type: ignore[arg-type]
    finally:
        peer.close()
        holder.close()
    assert [type(event.packet) for event in given[0]] == [Open, Abort]


def test_what_a_sender_sent_the_listener_before_its_process_took_over_reaches_that_process():
    """The listener may hear a process's "ready" before it reads what that process's sender
    sent it meanwhile (an ABORT right behind the OPEN): handed over after, it was dropped."""
    with listener() as station, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        port = station._listener.local_port
        peer.bind(("127.0.0.1", 0))
        ready, theirs = Pipe()
        taking = Sender(0, peer.getsockname(), 5, None, ready)  # type: ignore[arg-type]
        station.senders[taking.source] = taking
        abort = encode(Abort("changed my mind"), peer.getsockname()[1], port)
        peer.sendto(abort, ("127.0.0.1", port))
        theirs.send(("ready", []))
        station._hear(taking)
    assert theirs.recv() == [abort] and not station.dropped


def test_past_what_the_listener_holds_for_a_starting_process_each_datagram_is_counted():
    with listener() as station:
        starting = Sender(0, ("127.0.0.1", 40000), 5, None, None)  # type: ignore[arg-type]
        station.senders[starting.source] = starting
        abort = encode(Abort("again"), 40000, station._listener.local_port)
        for _ in range(HELD_MOST + 3):
            station._arrived(abort, starting.source)
    assert starting.came_since == [abort] * HELD_MOST
    assert station.dropped == Counter({"more than a starting process is held": 3})


def test_a_station_stopped_as_a_process_puts_its_file_in_place_waits_for_it(tmp_path):
    """Its sender has heard that all is well: a station stopped then lets the process sync
    the file and move it into place (it once killed it after two seconds, the whole file
    left as .partial)."""
    env, placing = placing_slowly(tmp_path, 3)  # longer than the station's grace
    (sent,) = files(tmp_path / "src", 1, 1_000_000)
    recv, port, out = station(tmp_path, env=env)
    result = send(str(sent), f"127.0.0.1:{port}")
    assert result.returncode == 0, result.stderr
    until(placing.exists, "the station's process putting the file in place")
    got, err = stop(recv)
    assert [r["ok"] for r in got] == [True] and intact([sent], out), err
    assert os.listdir(out) == [sent.name] and "for a sender's process to put the file it received in place" in err
