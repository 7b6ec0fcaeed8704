"""Offloaded transfers: ``netblt send --board`` and ``netblt recv --board`` through
``netblt sim-board``, against a software peer, as a user runs them: byte-exact, or a
clear failure with no file that looks complete. The board's wire goes to a pcap, whose
frames are read back with the host codec and with scapy."""

from __future__ import annotations

import json
import math
import os
import random
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from clitools import SimBoard, finish, free_port, reports, send, spawn, start_recv
from scapy.layers.inet import IP, UDP
from scapy.utils import rdpcap
from test_scapy_vectors import TYPES, read

from netblt.driver.framing import HEADER_SIZE
from netblt.protocol import codec, packets
from netblt.host.files import trailer_size
from netblt.hw.liteeth_core import MAC_ADDRESS
from netblt.bench import wire_pacing

pytestmark = pytest.mark.xdist_group("board_transfer")  # one worker: the module's board is its fixture's

SIZE = 40_000
"""Three 16 KiB buffers, the last one short: a few seconds through the simulated board."""


@pytest.fixture(scope="module")
def pcap(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("wire") / "board.pcap"


@pytest.fixture(scope="module")
def board(pcap):
    sim = SimBoard("--pcap", str(pcap))
    yield sim
    if sim.proc.poll() is None:
        sim.proc.kill()
        sim.proc.wait()


def relay(forward: int, loss: str, seed: int, duplicate: str = "0%") -> int:
    """``netblt netem`` in front of ``forward``; its port."""
    port = free_port()
    proc = spawn(["netem", "--listen", f"127.0.0.1:{port}", "--forward", f"127.0.0.1:{forward}",
                  "--loss", loss, "--duplicate", duplicate, "--delay", "2ms", "--seed", str(seed)],
                 stdout=subprocess.PIPE, text=True)
    assert "netblt netem" in proc.stdout.readline()
    return port


def data(tmp_path: Path, seed: int, size: int = SIZE) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(random.Random(seed).randbytes(size))
    return path


def partly_received(tmp_path: Path, source: Path, held: int) -> Path:
    """An output folder holding buffer ``held`` (of 16 KiB) of ``source`` in a partial file
    with its resume record, as an interrupted transfer leaves them."""
    out = tmp_path / "out"
    out.mkdir()
    data = source.read_bytes()
    start, end = (held - 1) * 16384, min(held * 16384, len(data))
    with open(out / "data.bin.partial", "wb") as f:
        f.seek(start)
        f.write(data[start:end])
    (out / "data.bin.partial.resume").write_text(json.dumps(
        {"size": len(data), "sha256": None, "modified": source.stat().st_mtime_ns, "ranges": [[start, end]]}))
    return out


def board_sends(board: SimBoard, tmp_path: Path, *options: str, loss: str = "0%", link_loss: str = "0%",
                seed: int = 1, held: int | None = None, recv_options: tuple[str, ...] = (),
                size: int = SIZE) -> tuple[dict, dict]:
    tmp_path.mkdir(exist_ok=True)
    source = data(tmp_path, seed, size)
    out = partly_received(tmp_path, source, held) if held else tmp_path / "out"
    out.mkdir(exist_ok=True)
    recv, port = start_recv(out, *recv_options)
    peer = relay(port, loss, seed) if loss != "0%" else port
    link = relay(board.link, link_loss, seed + 100, link_loss) if link_loss != "0%" else board.link
    done = send(str(source), f"127.0.0.1:{peer}", "--board", f"127.0.0.1:{link}", "--local-port",
                str(board.netblt), "--json", *options, timeout=240)
    got, err = finish(recv, timeout=60)
    assert done.returncode == 0, f"board's host: {done.stderr}\nreceiver: {err}"
    assert (out / "data.bin").read_bytes() == source.read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["data.bin"]
    return reports(done.stdout)[0], got[0]


def board_receives(board: SimBoard, tmp_path: Path, *send_options: str, loss: str = "0%", link_loss: str = "0%",
                   seed: int = 1, during=None, held: int | None = None,
                   recv_options: tuple[str, ...] = (), size: int = SIZE) -> tuple[dict, dict]:
    tmp_path.mkdir(exist_ok=True)
    source = data(tmp_path, seed, size)
    out = partly_received(tmp_path, source, held) if held else tmp_path / "out"
    out.mkdir(exist_ok=True)
    link = relay(board.link, link_loss, seed + 100, link_loss) if link_loss != "0%" else board.link
    recv = spawn(["recv", "--board", f"127.0.0.1:{link}", "--listen", f":{board.netblt}", "--out", str(out),
                  "--json", *recv_options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=out)
    said = ""
    while "waiting for a sender" not in (line := recv.stderr.readline()):
        said += line
        assert line, said + recv.stderr.read()
    peer = relay(board.netblt, loss, seed) if loss != "0%" else board.netblt
    if during:
        during.start()
    done = send(str(source), f"127.0.0.1:{peer}", "--json", *send_options, timeout=240)
    stdout, err = recv.communicate(timeout=60)
    assert done.returncode == 0, f"sender: {done.stderr}\nreceiving board's host: {err}{stdout}"
    assert (out / "data.bin").read_bytes() == source.read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["data.bin"]
    return reports(done.stdout)[0], reports(stdout)[0]


def test_a_board_sends_a_file_to_a_software_receiver(board, tmp_path):
    sender, receiver = board_sends(board, tmp_path)
    assert sender["ok"] and receiver["ok"] and sender["sha256"] == receiver["sha256"]
    assert (sender["data_path"], receiver["data_path"]) == ("board", "software")
    assert sender["buffer_size"] == 16384 and sender["outstanding_buffers"] == 2  # what the board holds
    assert sender["host_link_bytes"] > SIZE  # the data crossed the host link, once
    assert sender["datapath_cpu_seconds"] == 0.0


def test_a_board_receives_a_file_from_a_software_sender(board, tmp_path):
    sender, receiver = board_receives(board, tmp_path)
    assert receiver["ok"] and receiver["data_path"] == "board" and receiver["bytes"] == SIZE
    assert receiver["host_link_bytes"] > SIZE


@pytest.mark.parametrize("loss", ["1%", "5%"])
def test_a_board_sends_over_a_lossy_wan(board, tmp_path, loss):
    sender, receiver = board_sends(board, tmp_path, loss=loss, seed=int(loss[0]))
    assert receiver["ok"]


@pytest.mark.parametrize("loss", ["1%", "5%"])
def test_a_board_receives_over_a_lossy_wan(board, tmp_path, loss):
    sender, receiver = board_receives(board, tmp_path, loss=loss, seed=int(loss[0]) + 10)
    assert receiver["ok"]


@pytest.mark.parametrize("way, held", [("sends", 2), ("receives", 1)])
def test_a_transfer_through_a_board_resumes_a_partial_file(board, tmp_path, way, held):
    """The receiver already holds one buffer of the file, as an interrupted transfer left
    it: the board's end sends, or takes, only the others."""
    carry = board_sends if way == "sends" else board_receives
    sender, receiver = carry(board, tmp_path, held=held, seed=61 + held)
    assert sender["ok"] and receiver["ok"]
    assert receiver["resumed_bytes"] == 16384 and receiver["bytes"] == SIZE - 16384


def test_a_board_sends_to_a_board_over_a_lossy_wan(board, tmp_path):
    """Two simulated boards and no software data path anywhere, 5% loss between them."""
    sending = SimBoard()  # the design is built by now: this one starts in seconds
    try:
        sender, receiver = board_receives(board, tmp_path, "--board", f"127.0.0.1:{sending.link}", "--local-port",
                                          str(sending.netblt), loss="5%", seed=51)
    finally:
        sending.proc.kill()
        sending.proc.wait()
    assert sender["ok"] and receiver["ok"] and sender["data_path"] == receiver["data_path"] == "board"


@pytest.mark.parametrize("way", ["sends", "receives"])
def test_a_lossy_host_link_loses_nothing(board, tmp_path, way):
    """A tenth of the host link's datagrams lost and a tenth duplicated, each way: every
    request the host sent ran once on the board (its LINK_EXECUTED counter), and lost
    replies and repeated requests were answered from the stored replies (LINK_REPLAYED)."""
    carry = board_sends if way == "sends" else board_receives
    before = board.status()
    sender, receiver = carry(board, tmp_path, link_loss="10%", seed=21)
    after = board.status()
    assert sender["ok"] and receiver["ok"]
    host = sender if way == "sends" else receiver
    executed = after["LINK_EXECUTED"] - before["LINK_EXECUTED"]
    # The session's IDs ran in order, each once; the host's count is at its report, before
    # its closing write (TAKEOVER_AFTER = 0, BoardDataPath.close).
    assert executed == after["LINK_NEXT_ID"] - 1 == host["host_link_requests"] + 1
    assert after["LINK_REPLAYED"] > before["LINK_REPLAYED"]


def test_hostile_packets_at_the_boards_port_change_nothing(board, tmp_path):
    """Garbage, forged DATA from a stranger and forged OPENs sprayed at the board's NETBLT
    port while it receives: counted and dropped by the board, the file byte-exact."""
    stop = threading.Event()

    def spray() -> None:
        rng = random.Random(5)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            while not stop.is_set():
                forged = codec.encode(packets.Data(1, rng.randrange(12), 0, rng.randbytes(1448), False),
                                      rng.randrange(1 << 16), board.netblt)
                for datagram in (rng.randbytes(rng.randrange(1, 200)), forged,
                                 codec.encode(packets.Open(uid=7, buffer_size=16384, transfer_size=9,
                                                           packet_size=1448, burst_size=1, burst_interval=1,
                                                           death_timer=9, max_buffers=1, write_mode=True, data_checksum=False,
                                                           client_string=b"intruder"), 9, board.netblt)):
                    s.sendto(datagram, ("127.0.0.1", board.netblt))
                stop.wait(0.5)  # a tenth of what the simulated wire carries: hostile, not a flood

    thread = threading.Thread(target=spray, daemon=True)
    try:
        sender, receiver = board_receives(board, tmp_path, seed=31, during=thread)
    finally:
        stop.set()
    assert receiver["ok"]
    assert sum(receiver["dropped"].values()) > 0, receiver  # the board counted what it dropped


def test_every_frame_the_board_sent_decodes_and_obeys_negotiation(board, pcap, tmp_path):
    """After the transfers above: the board's frames read with the host codec and scapy;
    DATA is no larger than negotiated, a buffer's packets are exactly the negotiated count,
    and pacing at the wire is exact to a clock (the pcap has the simulation's nanoseconds):
    each packet on its grant's grid point, or, where the board's one transmit port was
    busy then, as soon as it freed (bench/wire_pacing.py). The receiver's offers may change
    the rate: each NULL-ACK with new values starts a new grid, and the last one's
    interval is the one the board holds.

    The rate leaves the wire idle between packets, so the pacer's grid shows. A 1448-byte
    DATA frame (615.2 cycles on the wire) and the host link's 60-byte reply to an upload
    of the next buffer (33.6) take 648.8 cycles; a slowed board's clock scales every
    rate by the simulation's speed, and on an idle machine 150k came to 648: every packet
    waited for the wire and the interval could not be read from the frames. 100k came to
    645 in a make test whose other worker slowed the simulation; 50k keeps twice that
    margin."""
    sender, _ = board_sends(board, tmp_path, "--rate", "50k", seed=41)
    registers = board.status()
    assert registers["BURST_SIZE"] == sender["burst_size"] == 1  # slowed thousands of times: a packet per burst
    receiver_port = int(sender["peer"].rsplit(":", 1)[1])
    everything = rdpcap(str(pcap))
    frames = [f for f in everything if UDP in f and f[UDP].sport == board.netblt and f[IP].src != "127.0.0.1"]
    assert frames
    buffers: dict[int, set[int]] = {}
    for frame in frames:
        wire = bytes(frame[UDP].payload)[:frame[UDP].len - 8]
        decoded = codec.decode(wire)  # raises on any malformed packet
        header, body = read(wire)  # scapy's reading, independent of the codec
        assert header.version == 2 and header.lport == board.netblt and header.fport == decoded.foreign_port
        assert (TYPES[header.type] in {"DATA", "LDATA"}) == isinstance(decoded.packet, packets.Data)
        if isinstance(decoded.packet, packets.Data) and frame[UDP].dport == receiver_port:
            assert len(decoded.packet.payload) <= 1448
            assert len(wire) == HEADER_SIZE + len(decoded.packet.payload)
            buffers.setdefault(decoded.packet.buffer, set()).add(decoded.packet.packet)
    assert sorted(buffers) == [1, 2, 3]
    last = SIZE + trailer_size(sealed=False) - 2 * 16384  # the data, then its digest's trailer
    assert buffers[1] == buffers[2] == set(range(12)) and buffers[3] == set(range(math.ceil(last / 1448)))
    on_wire, changes = wire_pacing.sent(everything, MAC_ADDRESS, board.netblt, receiver_port,
                                        (sender["burst_size"], sender["burst_interval_ms"]))
    intervals, results = wire_pacing.check_transfer(on_wire, changes, 1, registers["CLOCK_HZ"])
    assert intervals[-1] == registers["BURST_INTERVAL"]
    assert not [fault for r in results for fault in r.faults]
    assert sum(r.on_grid + r.waited + r.first_of_buffer + r.unjudged for r in results) == \
        sum(map(len, buffers.values()))
    assert sum(r.on_grid for r in results) > sum(r.waited + r.first_of_buffer + r.unjudged for r in results)


@pytest.mark.skipif(os.geteuid() != 0, reason="native IP needs root")
def test_a_board_sends_and_receives_natively_on_ip(tmp_path):
    """--transport ip: the board's DATA and control packets are IP protocol 30, to and from
    software peers that can only hear protocol 30 (raw sockets), both ways."""
    native = SimBoard("--transport", "ip")
    try:
        sender, receiver = board_sends(native, tmp_path / "sends", "--transport", "ip",
                                       recv_options=("--transport", "ip"), seed=71)
        assert sender["ok"] and receiver["ok"] and sender["data_path"] == "board"
        sender, receiver = board_receives(native, tmp_path / "receives", "--transport", "ip",
                                          recv_options=("--transport", "ip"), seed=72)
        assert sender["ok"] and receiver["ok"] and receiver["data_path"] == "board"
    finally:
        native.proc.kill()
        native.proc.wait()


def test_a_board_refuses_a_stream_it_cannot_size(board, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    recv = spawn(["recv", "--board", f"127.0.0.1:{board.link}", "--listen", f":{board.netblt}", "--out", str(out),
                  "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = ""
    while "waiting for a sender" not in (line := recv.stderr.readline()):
        said += line
        assert line, said + recv.stderr.read()
    done = send("-", f"127.0.0.1:{board.netblt}", input=os.urandom(1000).hex(), timeout=120)
    assert done.returncode == 1
    assert "receiving board needs the transfer's size" in done.stderr
    recv.kill()
    assert not list(out.iterdir())
