"""A receiver on a shared host: what a sender may not do to it (issue 12, item 3 and 4)."""

import os
import socket
import subprocess
import threading
import time
from collections import deque

import pytest
from clitools import NETBLT, finish, free_port, send, start_recv

from netblt.host.announce import Announcement
from netblt.host.auth import WINDOW, Secret
from netblt.protocol.codec import decode, encode
from netblt.host.transfer import Gate, Output, Quiet, Reception
from netblt.protocol.endpoint import Admission
from netblt.protocol.events import Admit
from netblt.protocol.params import Params
from netblt.host.files import TRAILER, TRAILER_MAGIC, Expectation, InOrder, Verifier
from netblt.protocol.packets import Abort, Open, Refused, Response

SECRET = b"correct horse battery staple"


def ask(port: int, client_string: bytes, uid: int = 7) -> object:
    """Send one OPEN from a fresh socket; the answer's packet."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.settimeout(10)
        peer.connect(("127.0.0.1", port))
        ask = Open(uid=uid, buffer_size=14320, packet_size=1432, burst_size=5, burst_interval=40,
                   death_timer=30, max_buffers=2, data_checksum=False, write_mode=True, transfer_size=5,
                   client_string=client_string)
        peer.send(encode(ask, peer.getsockname()[1], port))
        return decode(peer.recv(2048)).packet


def offer(name: str) -> bytes:
    return Announcement(name, 5, "00" * 32).encode()


@pytest.fixture
def receiver(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out))
    yield out, port
    recv.kill()
    recv.wait()


@pytest.mark.parametrize("name, why", [
    ("../escape", "a path that could leave the output directory"),
    ("a/../../escape", "a path that could leave the output directory"),
    ("/etc/passwd", "an absolute path"),
    (".bashrc", "a hidden file or directory"),
    ("a/.ssh/authorized_keys", "a hidden file or directory"),
    ("a//b", "a path that could leave the output directory"),
    ("bell\x07", "control or unassigned characters"),
    ("x" * 256, "a component longer than 255 bytes"),
])
def test_unsafe_names_are_refused_with_the_reason(receiver, tmp_path, name, why):
    out, port = receiver
    answer = ask(port, offer(name))
    assert isinstance(answer, Refused) and answer.reason == f"unsafe file name {name!r}: {why}"
    assert not any(out.iterdir()) and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_something_other_than_a_file_announcement_is_refused(receiver):
    _, port = receiver
    answer = ask(port, b"netblt-recv hello")
    assert isinstance(answer, Refused) and "netblt-file/1" in answer.reason


def test_a_safe_utf8_name_is_kept_as_it_is(receiver):
    _, port = receiver
    assert isinstance(ask(port, offer("my report é.bin")), Response)


def test_an_existing_file_is_replaced_only_with_force(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "data.bin").write_bytes(b"precious")
    source = tmp_path / "data.bin"
    source.write_bytes(os.urandom(50_000))
    recv, port = start_recv(tmp_path, "--out", str(out))
    refused = send(str(source), f"127.0.0.1:{port}")
    assert refused.returncode == 1
    assert "refused by peer: data.bin exists at the receiver (it replaces files only with --force)" in refused.stderr
    assert (out / "data.bin").read_bytes() == b"precious"
    recv.kill()
    recv.wait()
    recv, port = start_recv(tmp_path, "--out", str(out), "--force")
    assert send(str(source), f"127.0.0.1:{port}").returncode == 0
    finish(recv)
    assert (out / "data.bin").read_bytes() == source.read_bytes()


def test_a_symlink_in_the_output_directory_is_not_followed(tmp_path):
    elsewhere, out = tmp_path / "elsewhere", tmp_path / "out"
    elsewhere.mkdir()
    out.mkdir()
    (out / "photos").symlink_to(elsewhere)
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.jpg").write_bytes(b"jpeg")
    recv, port = start_recv(tmp_path, "--out", str(out))
    result = send(str(tmp_path / "photos"), f"127.0.0.1:{port}")
    recv.kill()
    recv.wait()
    assert result.returncode == 1 and "cannot write into photos: it is not a directory (or is a symlink)" in result.stderr
    assert not any(elsewhere.iterdir())


@pytest.mark.parametrize("planted", ["data.bin.partial", "data.bin.partial.resume"])
def test_a_planted_partial_symlink_is_not_followed(tmp_path, planted):
    """Another user's ``NAME.partial`` or resume record as a symlink to a file outside the
    output directory: that file is never written. A partial file that is a link is refused;
    a record that is one is not read, and is replaced by the real one."""
    victim, out = tmp_path / "victim", tmp_path / "out"
    victim.write_bytes(b"precious")
    out.mkdir()
    (out / planted).symlink_to(victim)
    source = tmp_path / "data.bin"
    source.write_bytes(os.urandom(100_000))
    recv, port = start_recv(tmp_path, "--out", str(out))
    result = send(str(source), f"127.0.0.1:{port}")
    recv.kill()
    recv.wait()
    assert victim.read_bytes() == b"precious"
    if planted.endswith(".partial"):
        assert result.returncode == 1 and "data.bin" in result.stderr
    else:
        assert result.returncode == 0 and (out / "data.bin").read_bytes() == source.read_bytes()


def test_hidden_names_are_refused_by_the_sender_before_it_connects(tmp_path):
    (tmp_path / ".bashrc").write_text("alias ls=rm")
    result = send(str(tmp_path / ".bashrc"), "127.0.0.1:9")
    assert result.returncode == 1 and "the receiver refuses a hidden file or directory; choose another " \
        "name with --name" in result.stderr and "connecting" not in result.stderr


@pytest.mark.parametrize("out, message", [
    ("newdir/", "output directory newdir/ does not exist"),
    ("missing/file.bin", "cannot write missing/file.bin: the directory missing does not exist"),
    ("existing.bin", "existing.bin exists (give --force to replace it)"),
])
def test_the_output_location_is_checked_at_start(tmp_path, out, message):
    (tmp_path / "existing.bin").write_text("x")
    result = subprocess.run(NETBLT + ["recv", "--listen", f"127.0.0.1:{free_port()}", "--out", out],
                            capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert result.returncode == 2 and result.stderr == f"netblt: error: {message}\n"
    assert not (tmp_path / "newdir").exists() and not (tmp_path / "missing").exists()


def test_one_output_file_takes_one_file_only(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).write_text(name)
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "one.bin"))
    result = send(str(tmp_path / "a"), str(tmp_path / "b"), f"127.0.0.1:{port}")
    recv.kill()
    recv.wait()
    assert result.returncode == 1 and "writes one file" in result.stderr and not (tmp_path / "one.bin").exists()


@pytest.mark.parametrize("allow, admitted", [("192.0.2.0/24", False), ("127.0.0.0/8", True),
                                             ("2001:db8::/32", False)])
def test_only_allowed_senders_are_admitted(tmp_path, allow, admitted):
    source = tmp_path / "f"
    source.write_bytes(b"data")
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "got"), "--allow", allow, "--allow", "198.51.100.7")
    result = send(str(source), f"127.0.0.1:{port}")
    if admitted:
        finish(recv)
        assert result.returncode == 0 and (tmp_path / "got").read_bytes() == b"data"
    else:
        recv.kill()
        recv.wait()
        assert result.returncode == 1 and "127.0.0.1" in result.stderr and "is not allowed to send here" in result.stderr


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "secret"
    path.write_bytes(SECRET + b"\n")
    return path


def test_a_shared_secret_admits_its_holder_and_refuses_everyone_else(tmp_path, secret_file):
    source = tmp_path / "f"
    source.write_bytes(os.urandom(200_000))
    (tmp_path / "wrong").write_bytes(b"some other secret entirely")
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out), "--secret-file", str(secret_file))
    none = send(str(source), f"127.0.0.1:{port}")
    assert none.returncode == 1 and "authentication required" in none.stderr
    wrong = send(str(source), f"127.0.0.1:{port}", "--secret-file", str(tmp_path / "wrong"))
    assert wrong.returncode == 1 and "authentication failed: the proof does not match" in wrong.stderr
    assert not any(out.iterdir())
    right = send(str(source), f"127.0.0.1:{port}", env={**os.environ, "NETBLT_SECRET": SECRET.decode()})
    (report,), _ = finish(recv)
    assert right.returncode == 0 and report["ok"] and (out / "f").read_bytes() == source.read_bytes()


def test_the_secret_does_not_open_the_allow_list(tmp_path, secret_file):
    """--allow and a secret both hold: a sender outside the list is refused though it
    holds the secret."""
    source = tmp_path / "f"
    source.write_bytes(b"data")
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "got"), "--allow", "192.0.2.0/24",
                            "--secret-file", str(secret_file))
    result = send(str(source), f"127.0.0.1:{port}", "--secret-file", str(secret_file))
    recv.kill()
    recv.wait()
    assert result.returncode == 1 and "127.0.0.1" in result.stderr and "is not allowed to send here" in result.stderr
    assert not (tmp_path / "got").exists()


def test_a_sender_with_a_secret_aborts_at_a_receiver_without_it(tmp_path, secret_file):
    source = tmp_path / "f"
    source.write_bytes(b"secret data")
    recv, port = start_recv(tmp_path, "--out", str(tmp_path / "got"))
    result = send(str(source), f"127.0.0.1:{port}", "--secret-file", str(secret_file))
    finish(recv)
    assert result.returncode == 1 and "the receiver did not prove knowledge of the shared secret" in result.stderr
    assert not (tmp_path / "got").exists()


def test_a_short_secret_is_a_bad_argument(tmp_path):
    (tmp_path / "short").write_text("abc")
    result = subprocess.run(NETBLT + ["send", "x", "127.0.0.1", "--secret-file", str(tmp_path / "short")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "the shared secret has 3 bytes; use at least 16" in result.stderr


def test_a_recorded_open_cannot_be_replayed_or_reused_later():
    sender, receiver = Secret(SECRET), Secret(SECRET)
    signed = sender.sign_open(42, True, offer("f"))
    assert receiver.check_open(42, True, signed) is None
    assert receiver.check_open(42, True, signed) == "authentication failed: this OPEN was admitted before (a replay)"
    assert "s off this receiver's clock" in Secret(SECRET).check_open(42, True, signed, now=time.time() + WINDOW + 2)
    assert "does not match" in Secret(SECRET).check_open(43, True, signed)  # another connection's proof
    tampered = signed.replace(b"size=5", b"size=6")
    assert "does not match" in Secret(SECRET).check_open(42, True, tampered)
    assert Secret(SECRET).check_response(42, signed, receiver.sign_response(42, signed)) is None
    assert Secret(SECRET).check_response(42, signed, Secret(b"x" * 16).sign_response(42, signed))


def test_an_open_dated_ahead_of_the_receivers_clock_is_refused():
    """Skew counts both ways: an OPEN from hours ahead could be replayed once the replay
    memory had forgotten it."""
    signed = Secret(SECRET).sign_open(42, True, offer("f"))
    for ahead in (WINDOW + 2, 3 * 3600):
        assert "s off this receiver's clock" in Secret(SECRET).check_open(42, True, signed, now=time.time() - ahead)


@pytest.mark.parametrize("later", [5, WINDOW - 2])
def test_an_open_replayed_later_within_the_window_is_refused(later):
    """The replay memory outlasts the time window: a copy replayed any time its time is
    still acceptable is refused."""
    receiver, now = Secret(SECRET), time.time()
    signed = Secret(SECRET).sign_open(42, True, offer("f"))
    assert receiver.check_open(42, True, signed, now=now) is None
    assert receiver.check_open(42, True, signed, now=now + later) == (
        "authentication failed: this OPEN was admitted before (a replay)")


@pytest.mark.parametrize("at", [0, 31, -1])
def test_an_open_with_any_digit_of_its_mac_damaged_is_refused(at):
    signed = Secret(SECRET).sign_open(42, True, offer("f"))
    digits = bytearray(signed)
    position = len(signed) - 64 + at if at >= 0 else len(signed) + at
    digits[position] = ord("0") if digits[position] != ord("0") else ord("1")
    assert "does not match" in Secret(SECRET).check_open(42, True, bytes(digits))


def test_a_response_recorded_on_another_connection_is_refused():
    """The RESPONSE's MAC covers the connection's UID and the OPEN's nonce, so one recorded
    from another connection (another UID, or another OPEN with the same UID) proves nothing."""
    sender, receiver = Secret(SECRET), Secret(SECRET)
    signed, other = sender.sign_open(42, True, offer("f")), sender.sign_open(42, True, offer("f"))
    response = receiver.sign_response(42, signed)
    assert sender.check_response(42, signed, response) is None
    assert sender.check_response(43, signed, response) == "the receiver did not prove knowledge of the shared secret"
    assert sender.check_response(42, other, response) == "the receiver did not prove knowledge of the shared secret"


def answers(peer: socket.socket) -> object:
    """The next NETBLT packet ``peer`` receives."""
    return decode(peer.recv(2048)).packet


def test_a_late_copy_of_a_finished_connections_open_is_refused(tmp_path):
    """An OPEN whose connection (its sender's address and UID) has ended, arriving again
    (a duplicate the path held back), does not start it over."""
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out), "--keep-serving")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.settimeout(10)
        peer.connect(("127.0.0.1", port))
        here = peer.getsockname()[1]
        opening = encode(Open(uid=9, buffer_size=14320, packet_size=1432, burst_size=5, burst_interval=40,
                              death_timer=30, max_buffers=2, data_checksum=False, write_mode=True,
                              transfer_size=5, client_string=offer("f")), here, port)
        peer.send(opening)
        assert isinstance(answers(peer), Response)
        peer.send(encode(Abort("stopped by its user"), here, port))
        time.sleep(0.5)
        peer.send(opening)
        while not isinstance(answer := answers(peer), Refused):
            pass
    recv.kill()
    recv.wait()
    assert answer.reason == "that connection is over"


def test_a_second_sender_between_the_files_of_one_send_is_refused(tmp_path):
    """Between two files of one send (its session), another sender's OPEN is refused and
    the same send's next file admitted."""

    def admission(session: str, index: int) -> Admission:
        reception = Reception(Output(directory=tmp_path), Gate(), Quiet(), force=False, session="5e55101a",
                              finished=deque())
        string = Announcement("f", 5, "00" * 32, index=index, count=2, session=session).encode()
        params = Params(buffer_size=14320, packet_size=1432, burst_size=5, burst_interval=40, max_buffers=2,
                        data_checksum=False, death_timer=30)
        return reception.admit(Admit(string, params, ("127.0.0.1", 5000), uid=index, transfer_size=5))

    assert admission("0a0b0c0d", 1).refusal == "busy with another sender's files; try again when they are done"
    assert admission("5e55101a", 2).refusal is None


def test_a_streams_digest_must_carry_the_secrets_seal():
    data = b"stream data"
    digest = __import__("hashlib").sha256(data).digest()
    secret = Secret(SECRET)
    trailer = TRAILER.pack(TRAILER_MAGIC, len(data), digest)
    for seal, ok in ((secret.seal(1, digest), True), (Secret(b"y" * 16).seal(1, digest), False),
                     (secret.seal(2, digest), False)):
        expect = Expectation(Announcement("s", None), lambda d: secret.seal(1, d))
        verifier = Verifier(expect)
        order = InOrder(verifier.update, hold=expect.hold)
        order.add(0, data + trailer + seal)
        assert (verifier.problem(order) is None) == ok


@pytest.mark.parametrize("announced_size", [None, 11])
def test_a_damaged_trailer_fails_the_check(announced_size):
    """The trailer's magic, or a length other than what came (or was announced), fails the
    transfer even when its digest is the data's."""
    data = b"stream data"
    digest = __import__("hashlib").sha256(data).digest()

    def problem(trailer: bytes) -> str | None:
        expect = Expectation(Announcement("s", announced_size))
        verifier = Verifier(expect)
        order = InOrder(verifier.update, hold=expect.hold)
        order.add(0, data + trailer)
        return verifier.problem(order)

    assert problem(TRAILER.pack(TRAILER_MAGIC, len(data), digest)) is None
    assert problem(TRAILER.pack(b"nbltEND2", len(data), digest)) == "the data's trailer is damaged"
    assert problem(TRAILER.pack(TRAILER_MAGIC, len(data) + 1, digest)).startswith("size mismatch: the sender announced")
    assert problem(TRAILER.pack(TRAILER_MAGIC, len(data) - 1, digest)).startswith("size mismatch: the sender announced")


@pytest.mark.parametrize("guard, warned", [
    ([], True),
    (["--allow", "127.0.0.1"], False),
    (["--secret-file", "secret"], False),
    ("loopback", False),
])
def test_a_station_open_to_anyone_says_so(tmp_path, guard, warned):
    """A receiver that listens beyond loopback (here every address: it only listens, no
    packet leaves) with neither --allow nor a secret warns once; with either, or on
    loopback, it does not."""
    (tmp_path / "secret").write_text("s" * 32)
    host = "127.0.0.1" if guard == "loopback" else "0.0.0.0"
    recv, _ = start_recv(tmp_path, *([] if guard == "loopback" else guard), host=host)
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(recv.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + (10 if warned else 0.5)  # on a busy machine the line may come late
    while time.monotonic() < deadline and not any("anyone who can reach" in line for line in said):
        time.sleep(0.05)
    recv.terminate()
    recv.wait(timeout=30)
    reader.join(timeout=30)
    stderr = "".join(said)
    assert ("anyone who can reach this port can send files here" in stderr) == warned, stderr
