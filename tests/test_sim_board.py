"""``netblt sim-board``'s own behaviour: its bridge to loopback, its WAN, its options and
one-line errors (what a board does, on any backend, is tests/test_board_conformance.py's)."""

from __future__ import annotations

import ipaddress
import os
import random
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from clitools import NETBLT, SimBoard, free_port
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import rdpcap

from netblt.formats import host_link as F
from netblt.driver.link import BoardLink
from netblt.gateware.config import EngineConfig
from netblt.formats.registers import (
    ADDRESS, COMMAND_WORD, CONNECTION_FLAGS, DRAM_PHY_WORD, ENGINE_STATE, GEOMETRY_WORD, Command,
)
from netblt.protocol import codec, packets
from netblt.host.board_status import slots
from netblt.sim import frames
from netblt.sim.rtl import bridge


pytestmark = pytest.mark.xdist_group("sim_board")  # one worker: the module's boards are its fixtures'


def operations(*ops: F.Operation) -> bytes:
    return F.encode_operations(list(ops))


@pytest.mark.rtl
def test_the_boards_netblt_traffic_reaches_real_sockets_on_this_machine():
    """A peer on loopback, as issue 14's software end will be: the board's DATA reaches
    its socket as UDP from the board's NETBLT port, and its DATA reaches the board's slot."""
    sim = SimBoard()  # a board of its own: the module's has an owner already
    link = BoardLink(("127.0.0.1", sim.link))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.bind(("127.0.0.1", 0))
        peer.settimeout(60)
        peer_port = peer.getsockname()[1]
        link.open()

        def write(**registers: int) -> None:
            link.run(F.Type.REGISTERS, operations(*(F.Operation(F.Opcode.WRITE, ADDRESS[name], value)
                                                    for name, value in registers.items())))

        write(PACKET_SIZE=1024, LOCAL_PORT=7, PEER_PORT=8, PEER_ADDRESS=int(ipaddress.IPv4Address("127.0.0.1")),
              UDP_LOCAL_PORT=sim.netblt, UDP_PEER_PORT=peer_port, FLAGS=CONNECTION_FLAGS.pack(udp=1), PACING_MODE=0)
        data = random.Random(5).randbytes(2048)
        link.upload(0, data)
        write(ARG0=5, ARG1=len(data), COMMAND=COMMAND_WORD.pack(op=Command.SEND, slot=0))
        sent = b""
        for number in range(2):
            datagram, source = peer.recvfrom(65536)
            assert source == ("127.0.0.1", sim.netblt)
            decoded = codec.decode(datagram)
            assert (decoded.local_port, decoded.foreign_port) == (7, 8)
            assert (decoded.packet.buffer, decoded.packet.packet) == (5, number)
            sent += decoded.packet.payload
        assert sent == data
        write(ARG0=9, ARG1=0, COMMAND=COMMAND_WORD.pack(op=Command.POST, slot=0))
        for number in range(2):
            peer.sendto(codec.encode(packets.Data(9, number, 0, data[number * 1024:(number + 1) * 1024], number == 1),
                                     8, 7), ("127.0.0.1", sim.netblt))
        deadline = time.monotonic() + 60
        while sim.status()["RX_ACCEPTED"] < 2:
            assert time.monotonic() < deadline, "the board never took the peer's DATA"
            time.sleep(0.5)
        assert link.download(0, len(data)) == data
    link.close()
    code, stdout = sim.stop()
    assert code == 0 and "datagrams in: " in stdout


@pytest.mark.rtl
def test_the_wan_delays_and_loses_netblt_datagrams_each_way_in_simulated_time():
    """--wan-delay and --wan-loss: the board's DATA reaches the peer no sooner than the
    delay after the SEND by the board's own clock, the peer's DATA reaches the board's
    slot, and each way exactly the datagrams the summary says were delivered arrive."""
    delay, packets_each_way = 0.002, 16
    sim = SimBoard("--wan-delay", "2ms", "--wan-loss", "30%")
    link = BoardLink(("127.0.0.1", sim.link))
    clock_hz = EngineConfig().clock_hz
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
        peer.bind(("127.0.0.1", 0))
        link.open()

        def write(**registers: int) -> None:
            link.run(F.Type.REGISTERS, operations(*(F.Operation(F.Opcode.WRITE, ADDRESS[name], value)
                                                    for name, value in registers.items())))

        def read(name: str) -> int:
            _, body = link.run(F.Type.REGISTERS, operations(F.Operation(F.Opcode.READ, ADDRESS[name])))
            return F.decode_operations(body)[0].value

        def wait_until(cycles: int) -> None:
            while read("CYCLES") - cycles < 0:
                time.sleep(0.2)

        write(PACKET_SIZE=1024, LOCAL_PORT=7, PEER_PORT=8, PEER_ADDRESS=int(ipaddress.IPv4Address("127.0.0.1")),
              UDP_LOCAL_PORT=sim.netblt, UDP_PEER_PORT=peer.getsockname()[1], FLAGS=CONNECTION_FLAGS.pack(udp=1),
              PACING_MODE=0, COUNTERS_CLEAR=1)
        data = random.Random(6).randbytes(1024 * packets_each_way)
        link.upload(0, data)
        sent_at = read("CYCLES")
        write(ARG0=5, ARG1=len(data), COMMAND=COMMAND_WORD.pack(op=Command.SEND, slot=0))
        peer.settimeout(120)
        peer.recv(65536)
        assert read("CYCLES") - sent_at >= delay * clock_hz  # the board's clock saw the delay
        arrived = 1
        write(ARG0=9, ARG1=0, COMMAND=COMMAND_WORD.pack(op=Command.POST, slot=0))
        for number in range(packets_each_way):
            peer.sendto(codec.encode(packets.Data(9, number, 0, data[number * 1024:(number + 1) * 1024],
                                                  number == packets_each_way - 1), 8, 7), ("127.0.0.1", sim.netblt))
        wait_until(read("CYCLES") + int(3 * delay * clock_hz))  # past every arrival, both ways
        peer.setblocking(False)
        while True:
            try:
                peer.recv(65536)
            except BlockingIOError:
                break
            arrived += 1
        accepted = read("RX_ACCEPTED")
    link.close()
    code, stdout = sim.stop()
    assert code == 0, stdout
    assert "WAN: delay 2 ms, loss 30%" in stdout
    ways = dict(re.findall(r"NETBLT datagrams to the (board|peer): (.*)", stdout))
    counts = {way: dict((what, int(n)) for what, n in re.findall(r"(\w+) (\d+)", text)) for way, text in ways.items()}
    for way, got in (("peer", arrived), ("board", accepted)):
        assert counts[way]["sent"] == packets_each_way, (way, counts)
        assert counts[way]["delivered"] == got, (way, counts)
        assert 0 < counts[way].get("lost", 0) < packets_each_way, (way, counts)  # the seed loses some, not all


def test_a_board_that_does_not_answer_is_one_line_naming_it():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        port = silent.getsockname()[1]
        started = time.monotonic()
        done = subprocess.run(NETBLT + ["board", "status", f"127.0.0.1:{port}", "--timeout", "1s"],
                              capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"netblt: error: board 127.0.0.1:{port}: no answer for 1 s\n"
    assert time.monotonic() - started < 10
    closed = free_port()
    done = subprocess.run(NETBLT + ["board", "status", f"127.0.0.1:{closed}"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 1 and done.stderr == f"netblt: error: no board at 127.0.0.1:{closed}: " \
                                                    f"nothing listens on that port\n"


@pytest.mark.parametrize("args, error", [
    (["--slots", "dram"], "--slots dram needs --board: the slots go in that board's DRAM"),
    (["--link-address", "10.79.0.2"], "--link-address needs --model: the design under Verilator listens on 127.0.0.1"),
    (["--model", "--link-address", "board"], "argument --link-address: 'board' is not an IPv4 address"),
])
def test_sim_board_options_it_cannot_take_say_so_in_one_line(args, error):
    done = subprocess.run(NETBLT + ["sim-board", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == f"netblt sim-board: error: {error}"


def test_a_pace_waits_while_the_simulation_is_ahead_and_counts_how_far_it_fell_behind(monkeypatch):
    """--pace N: simulated time held at N times slower than real time; where the
    simulation cannot keep up, the summary says by how much."""
    slept: list[float] = []
    monkeypatch.setattr(bridge.time, "sleep", slept.append)
    pace = bridge.Pace(10_000)
    pace.keep(wall=0.25, simulated=50e-6)  # 0.5 s of real time due: 0.25 s ahead
    pace.keep(wall=1.8, simulated=100e-6)  # 1 s due, 1.8 s gone: 0.8 s behind
    pace.keep(wall=1.9, simulated=150e-6)  # 1.5 s due: 0.4 s behind, catching up
    assert slept == [pytest.approx(0.25)] and pace.most_behind == pytest.approx(0.8)
    free = bridge.Pace(0)
    free.keep(wall=0.0, simulated=1.0)
    assert slept == [pytest.approx(0.25)] and free.most_behind == 0
    done = subprocess.run(NETBLT + ["sim-board", "--pace", "-3"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == \
        "netblt sim-board: error: argument --pace: '-3' is not a whole number of times slower (0: as fast as it can)"


def test_the_summary_says_when_the_slots_memory_is_not_ready():
    """STATE's slots_ready is 0 while a board's DRAM starts, or until a host has levelled
    its reads where DRAM_PHY says they need it: the summary says which."""
    geometry = GEOMETRY_WORD.pack(data_width=32, tx_slots=16, rx_slots=16, log2_max_packets=12)
    starting = {"GEOMETRY": geometry, "SLOT_BYTES": 4 << 20, "STATE": ENGINE_STATE.pack(tx_idle=1), "DRAM_PHY": 0}
    assert slots(starting) == ("16 transmit and 16 receive slots of 4 MiB (4096-packet bitmaps), "
                               "their memory not ready yet (DRAM still starting)")
    ready = starting | {"STATE": ENGINE_STATE.pack(tx_idle=1, slots_ready=1)}
    assert slots(ready) == "16 transmit and 16 receive slots of 4 MiB (4096-packet bitmaps)"
    unlevelled = starting | {"DRAM_PHY": DRAM_PHY_WORD.pack(levelling=1, phases=2, words=2, modules=2)}
    assert slots(unlevelled).endswith(", in DRAM whose reads are not levelled yet (a host levels them when "
                                      "it opens the board)")


def test_the_model_names_a_port_that_is_taken_in_one_line():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        done = subprocess.run(NETBLT + ["sim-board", "--model", "--netblt-port", str(port)], capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"netblt sim-board: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


@pytest.mark.parametrize("size", [0, 1, 7, 1448])
def test_the_bridges_frames_are_those_scapy_builds_and_read_back_as_sent(size):
    """sim/frames.py packs the bridge's frames with struct (scapy per frame was most of
    a simulated transfer's Python): byte for byte scapy's, UDP and IP protocol 30 alike."""
    data = random.Random(size).randbytes(size)
    ether = Ether(dst="02:6e:62:6c:74:01", src="02:00:00:00:00:02")
    udp = frames.ethernet(ether.dst, ether.src, frames.ETHERTYPE_IPV4, frames.udp("127.0.0.1", "192.168.1.50", 5, 6, data))
    native = frames.ethernet(ether.dst, ether.src, frames.ETHERTYPE_IPV4, frames.ipv4("127.0.0.3", "127.0.0.1", 30, data))
    assert udp == bytes(ether / IP(src="127.0.0.1", dst="192.168.1.50") / UDP(sport=5, dport=6) / data)
    assert native == bytes(ether / IP(src="127.0.0.3", dst="127.0.0.1", proto=30) / data)
    padded = udp.ljust(60, b"\0") + b"\0" * 4  # the wire's padding and an FCS are not the datagram's
    assert frames.datagram(padded) == frames.Datagram("127.0.0.1", "192.168.1.50", 17, 5, 6, data)
    assert frames.datagram(native) == frames.Datagram("127.0.0.3", "127.0.0.1", 30, 0, 0, data)


def test_both_simulated_boards_pcaps_read_back_stamped_to_the_nanosecond(tmp_path):
    """sim-board's frames (Ethernet) and the model's datagrams (raw IPv4, no UDP checksum)
    go through one writer; scapy reads each packet back as written, at its time."""
    datagram = frames.udp("127.0.0.1", "127.0.0.2", 5, 6, b"netblt", checksum=False)
    frame = frames.ethernet("02:00:00:00:00:02", "02:6e:62:6c:74:01", frames.ETHERTYPE_IPV4,
                            frames.udp("127.0.0.1", "127.0.0.2", 5, 6, b"netblt"))
    for linktype, packet in ((frames.LINKTYPE_RAW, datagram), (frames.LINKTYPE_ETHERNET, frame)):
        path = tmp_path / f"{linktype}.pcap"
        pcap = frames.Pcap(path, linktype)
        for at in (12.000000345, 13.5):
            pcap.write(packet, at)
        pcap.close()
        read = rdpcap(str(path))
        assert [bytes(p) for p in read] == [packet, packet]
        assert [(p.time, p[UDP].dport, p[UDP].chksum == 0) for p in read] == [
            (pytest.approx(12.000000345, abs=1e-10), 6, linktype == frames.LINKTYPE_RAW),
            (pytest.approx(13.5, abs=1e-10), 6, linktype == frames.LINKTYPE_RAW)]


def test_a_malformed_frame_from_the_board_is_counted_and_dropped():
    """Lengths past the frame, a header shorter than IPv4's, not IPv4, an ARP cut short: no
    datagram, no traceback."""
    good = frames.ethernet("02:00:00:00:00:02", "02:6e:62:6c:74:01", frames.ETHERTYPE_IPV4,
                           frames.udp("192.168.1.50", "127.0.0.1", 5, 6, b"x" * 20))
    ip, udp = frames.ETHERNET.size, frames.ETHERNET.size + frames.IPV4.size
    bad = [good[:ip + 10], good[:ip] + b"\x44" + good[ip + 1:], good[:ip + 2] + b"\xff\xff" + good[ip + 4:],
           good[:udp + 4] + b"\x00\x30" + good[udp + 6:], good[:udp + 4] + b"\x00\x07" + good[udp + 6:],
           good[:12] + b"\x86\xdd" + good[14:], good[:10]]
    assert frames.datagram(good).payload == b"x" * 20
    for frame in bad:
        assert frames.datagram(frame) is None
    wire = bridge.Bridge(board=None, sockets={}, mtu=1500, wan=None, native=None, netblt_port=0, pcap=None)
    arp = bytes(Ether(src="02:6e:62:6c:74:01", dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, pdst="127.0.0.1"))
    for frame in [*bad, arp[:30]]:
        wire.arrived(frame)
    assert wire.counts == {"from the board, neither UDP nor NETBLT on IP (dropped)": len(bad),
                           "from the board, ARP cut short (dropped)": 1}


def udp_queue(port: int) -> tuple[int, int]:
    """The bytes waiting in the loopback UDP socket on ``port`` and the datagrams it dropped
    (/proc/net/udp)."""
    for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == f"0100007F:{port:04X}":
            return int(fields[4].split(":")[1], 16), int(fields[-1])
    raise AssertionError(f"no UDP socket on 127.0.0.1:{port}")


def resumed_until_drained(board: SimBoard, seconds: float) -> tuple[int, str]:
    """A stopped model let go on until its NETBLT port's queue is empty (``seconds`` at
    most), then stopped: its exit status and summary."""
    board.proc.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + seconds
    while udp_queue(board.netblt)[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    return board.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="a receive queue past the system's limit needs root (SO_RCVBUFFORCE)")
def test_the_model_keeps_the_data_that_comes_while_its_loop_is_busy():
    """A board takes DATA at its line's rate while it serves its host link; the model's one
    loop does both, so DATA that comes while it is busy (here: stopped) waits in its
    socket's queue. At the system's limit the queue held some 3,600 datagrams, and a
    256 MiB receive at defaults lost 4,000-5,900 packets to it."""
    board = SimBoard("--model")
    count, datagram = 8000, bytes(1472)
    try:
        board.proc.send_signal(signal.SIGSTOP)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
            for _ in range(count):
                peer.sendto(datagram, ("127.0.0.1", board.netblt))
        assert udp_queue(board.netblt)[1] == 0, "datagrams dropped while the model was busy"
        code, summary = resumed_until_drained(board, 30)
    finally:
        board.close()
    assert code == 0
    assert f"NETBLT datagrams to the board: delivered {count}, sent {count}" in summary, summary


def test_the_models_summary_counts_what_the_system_dropped_before_it_took_it():
    """Past the model's queue the system drops what comes for it, which its host sees as
    loss on the way: the summary says how much, as no board would have dropped it."""
    board = SimBoard("--model")
    datagram = bytes(1472)
    try:
        board.proc.send_signal(signal.SIGSTOP)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as peer:
            for _ in range(200):
                for _ in range(1000):
                    peer.sendto(datagram, ("127.0.0.1", board.netblt))
                if udp_queue(board.netblt)[1]:
                    break
        dropped = udp_queue(board.netblt)[1]
        assert dropped, "200,000 datagrams fitted the model's queue"
        code, summary = resumed_until_drained(board, 60)
    finally:
        board.close()
    assert code == 0
    assert f"  datagrams the system dropped before the model took them (its queue full): {dropped}\n" in summary
