"""A receiver locks onto the sender whose OPEN it accepted, whatever else arrives (issue 16)."""

import os
import random
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from clitools import finish, opening, spawn, start_recv

from netblt.protocol.codec import CodecError, decode, encode
from netblt.protocol.packets import Abort, Control, Data, Go, KeepAlive, NullAck, Ok, Quit, Refused, Response


def udp() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.5)
    return sock


def forgeries(port: int, own_port: int) -> list[bytes]:
    """Packets a path-adjacent host might send, with the NETBLT ports of a real peer."""
    def wire(packet):
        return encode(packet, own_port, port)
    return [wire(opening(99, "evil.bin")), wire(Control((Go(1, 1), Ok(2, 1, 1, 60000, 10)))),
            wire(NullAck(9, 1, 60000)), wire(KeepAlive()), wire(Quit("hijack")), wire(Abort("die")),
            wire(Refused("no")), wire(Data(1, 0, 0, b"X" * 1448)), os.urandom(64), b"\x00" * 3]


def answers(sock: socket.socket, quiet: float = 0.5) -> list:
    out = []
    while True:
        try:
            datagram = sock.recv(65536)
        except TimeoutError:
            return out
        try:
            out.append(decode(datagram).packet)
        except CodecError:
            out.append(datagram)


def test_packets_from_another_host_between_open_and_set_up_change_nothing(tmp_path):
    recv, port = start_recv(tmp_path, "--out", str(tmp_path))
    real, stranger = udp(), udp()
    try:
        real.sendto(encode(opening(7, "real.bin"), real.getsockname()[1], port), ("127.0.0.1", port))
        for datagram in forgeries(port, real.getsockname()[1]):  # at once: before the OPEN is handled
            stranger.sendto(datagram, ("127.0.0.1", port))
        to_real, to_stranger = answers(real), answers(stranger)
    finally:
        recv.kill()
        recv.wait()
        real.close()
        stranger.close()
    assert isinstance(to_real[0], Response) and to_real[0].uid == 7
    assert any(isinstance(p, Control) and p.messages and isinstance(p.messages[0], Go) for p in to_real)
    assert all(isinstance(p, (Response, Control)) for p in to_real)  # the stranger's ABORT/QUIT did nothing
    assert to_stranger == [Refused("busy with another transfer; try again when it ends")]
    assert not (tmp_path / "evil.bin.partial").exists()


def spray(port: int, stop: threading.Event, seed: int) -> int:
    """Garbage and forged NETBLT packets at ``port`` from another socket until stopped."""
    rnd = random.Random(seed)
    sent = 0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        packets = forgeries(port, sock.getsockname()[1])
        while not stop.is_set():
            choice = rnd.random()
            if choice < 0.5:
                datagram = rnd.choice(packets)
            elif choice < 0.8:
                datagram = bytearray(rnd.choice(packets))
                at = rnd.randrange(len(datagram))
                datagram[at] ^= 1 << rnd.randrange(8)
            else:
                datagram = os.urandom(rnd.randrange(1, 1500))
            try:
                sock.sendto(bytes(datagram), ("127.0.0.1", port))
            except OSError:
                pass  # the receiver may be gone between runs: an ICMP error comes back
            sent += 1
            if sent % 32 == 0:
                time.sleep(0.001)
    return sent


def sprayed_transfer(tmp_path, seed: int, size: int, rate: str) -> tuple[subprocess.Popen, dict, Path, Path]:
    """A transfer with garbage and forgeries sprayed at the receiver from its start to its end."""
    source = tmp_path / "payload.bin"
    source.write_bytes(os.urandom(size))
    out = tmp_path / "out"
    out.mkdir()
    recv, port = start_recv(tmp_path, "--out", str(out))
    sender = spawn(["send", str(source), f"127.0.0.1:{port}", "--rate", rate],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = recv.stderr.readline()
    assert line.startswith("netblt: receiving payload.bin"), line
    stop = threading.Event()
    sprayer = threading.Thread(target=spray, args=(port, stop, seed))
    sprayer.start()
    try:
        sender.communicate(timeout=60)
        (report,), _ = finish(recv)
    finally:
        stop.set()
        sprayer.join()
    return sender, report, source, out


@pytest.mark.parametrize("run", range(20))
def test_every_transfer_survives_a_spray_of_garbage_and_forgeries(tmp_path, run):
    sender, report, source, out = sprayed_transfer(tmp_path, run, 1_000_000 + run, "200M")
    assert sender.returncode == 0 and report["ok"], report["reason"]
    assert (out / "payload.bin").read_bytes() == source.read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["payload.bin"]


def test_forged_data_from_another_host_is_counted_and_dropped(tmp_path):
    sender, report, source, out = sprayed_transfer(tmp_path, 99, 2_000_000, "50M")
    assert sender.returncode == 0 and report["ok"]
    assert report["dropped"].get("not from the peer", 0) > 0
    assert (out / "payload.bin").read_bytes() == source.read_bytes()
