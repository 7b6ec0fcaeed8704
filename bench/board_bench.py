"""The offload benchmark: what a transfer through a board costs its host, and how the
board keeps time.

    python -m netblt.bench.board_bench            (make bench-board, about 6 minutes)

1. Through ``netblt sim-board`` (its wire in a pcap, stamped in simulated ns), with a
   software peer on loopback: a file sent by the board, then one received by it, as a
   user runs them. From the reports and the pcap: host CPU, host-link bytes by kind,
   the control loop of each received buffer split into board time (simulated, so
   exactly what the gateware takes) and host time (the receiving host's own socket
   calls, timed by a probe on its host-link socket), and the pacing of the board's
   DATA at its wire (bench/wire_pacing.py).
2. The host link at the host's own speed: driver/link.py's BoardLink uploading and
   downloading 64 MiB to a loopback responder that answers each request at once (a
   separate process, so only the host side's CPU is counted). A simulated board runs
   thousands of times slower than the host, so this is how CPU per GB is measured.
   Beside it, the floor: the same bytes through one socket with no protocol at all.
3. The software path's CPU per GB: ``netblt send`` to ``netblt recv`` on loopback, 256 MiB.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether  # noqa: F401 (reads the pcap's frames as Ethernet)
from scapy.utils import rdpcap

from ..driver.link import BoardLink
from ..driver.transport import GSO_MAX_BYTES, GSO_MAX_SEGMENTS, segmented
from ..formats import host_link as F
from ..formats.registers import ADDRESS, EVENT_WORD, RECEIVED_FLAGS, Event
from ..formats.boards import MAC_ADDRESS
from ..protocol import codec, packets
from .wire_pacing import check_transfer, sent

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
PROBED = [sys.executable, "-m", "netblt.bench.board_bench", "--probed"]
"""``netblt`` with its host-link socket timed (``--probed``): the receiving board's host."""
PROBE_LOG = "NETBLT_BENCH_PROBE"
TRANSFER = 1 << 20
LINK_BYTES = 64 << 20
SOFTWARE_BYTES = 256 << 20
PACED, PACED_RATE = 64 << 10, "150k"
"""A send paced well below the wire's rate (a simulated board's scaled clock makes
its default 90% of the wire): the pacing table's."""


# -- the probe: every host-link datagram the host sends or receives, timed -------------------


def run_probed(argv: list[str]) -> int:
    """``netblt ARGV`` with every BoardLink's datagrams, every request as the host submits
    it (before it waits for room in the window), and when the board data path takes a
    buffer's completion and has its data, logged to $NETBLT_BENCH_PROBE."""
    from ..driver import board_receive, link
    from ..host.cli import main

    log: list = []
    sending, receiving, submit = link.BoardLink._send, link.BoardLink._receive, link.BoardLink.submit

    def probed_send(self, datagrams: list[bytes]) -> None:
        sending(self, datagrams)
        now = time.monotonic()
        log.extend((now, "out", bytes(d)) for d in datagrams)

    def probed_receive(self) -> list[bytes]:
        came = receiving(self)
        now = time.monotonic()
        log.extend((now, "in", d) for d in came)
        return came

    def probed_submit(self, requests: F.Requests, join: bool = False, urgent: bool = False) -> list:
        now = time.monotonic()
        log.extend((now, "submit", F.encode(F.Header(kind, value=value), body)) for kind, body, value in requests)
        return submit(self, requests, join, urgent)

    completed = board_receive.ReceiveSlots._completed

    def probed_completed(self, index: int, slot, last: bool, count: int) -> None:
        log.append((time.monotonic(), "complete", slot.buffer.to_bytes(4, "big")))
        completed(self, index, slot, last, count)
        if slot.data is not None:
            log.append((time.monotonic(), "downloaded", slot.buffer.to_bytes(4, "big")))

    link.BoardLink._send, link.BoardLink._receive, link.BoardLink.submit = probed_send, probed_receive, probed_submit
    board_receive.ReceiveSlots._completed = probed_completed
    try:
        return main(argv)
    finally:
        with open(os.environ[PROBE_LOG], "w") as out:
            for at, way, datagram in log:
                out.write(json.dumps([at, way, datagram.hex()]) + "\n")


# -- 1. transfers through the simulated board -------------------------------------------------


def started(args: list[str], expect: str, env: dict | None = None) -> subprocess.Popen:
    """``args`` running, once their stderr says ``expect``."""
    proc = subprocess.Popen(args, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    text = ""
    while expect not in (line := proc.stderr.readline()):
        text += line
        if not line:
            raise SystemExit(f"netblt bench-board: {' '.join(args[2:4])} did not start: {text}{proc.stderr.read()}")
    return proc


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report(stdout: str) -> dict:
    return json.loads(next(line for line in stdout.splitlines() if line.startswith("{")))


def through_board(tmp: Path) -> dict:
    """Both directions through one simulated board; the reports, the pcap and the probe log."""
    source = tmp / "data.bin"
    source.write_bytes(os.urandom(TRANSFER))
    pcap = tmp / "board.pcap"
    board = subprocess.Popen(NETBLT + ["sim-board", "--pcap", str(pcap)], text=True, stdout=subprocess.PIPE)
    try:
        lines = [board.stdout.readline() for _ in range(2)]
        if not lines[1].startswith("netblt "):
            raise SystemExit("netblt bench-board: netblt sim-board did not start (its error is above)")
        link, port = (line.split()[1].rsplit(":", 1)[1] for line in lines)
        results = {"pcap": pcap, "board_port": int(port)}

        def board_sends(name: str, data: Path, *options: str) -> tuple[dict, dict, int]:
            out = tmp / name
            out.mkdir()
            recv_port = free_port()
            recv = started(NETBLT + ["recv", "--listen", f"127.0.0.1:{recv_port}", "--out", str(out), "--json"],
                           "waiting for a sender")
            sent = subprocess.run(NETBLT + ["send", str(data), f"127.0.0.1:{recv_port}", "--board",
                                            f"127.0.0.1:{link}", "--local-port", port, "--json", *options],
                                  capture_output=True, text=True, timeout=1800)
            received, _ = recv.communicate(timeout=60)
            if sent.returncode or (out / data.name).read_bytes() != data.read_bytes():
                raise SystemExit(f"netblt bench-board: the board's send failed: {sent.stderr}")
            return report(sent.stdout), report(received), recv_port

        results["sends"] = board_sends("sent", source)
        paced = tmp / "paced.bin"
        paced.write_bytes(os.urandom(PACED))
        results["paced"] = board_sends("paced", paced, "--rate", PACED_RATE)
        status = subprocess.run(NETBLT + ["board", "status", f"127.0.0.1:{link}", "--json"], capture_output=True,
                                text=True, timeout=60)
        results["registers"] = json.loads(status.stdout)["registers"]

        out = tmp / "received"
        out.mkdir()
        probe = tmp / "probe.jsonl"
        recv = started(PROBED + ["recv", "--board", f"127.0.0.1:{link}", "--listen", f":{port}", "--out", str(out),
                                 "--json"], "waiting for a sender", env=os.environ | {PROBE_LOG: str(probe)})
        sent = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{port}", "--json"],
                              capture_output=True, text=True, timeout=1800)
        received, _ = recv.communicate(timeout=60)
        if sent.returncode or recv.returncode:
            raise SystemExit(f"netblt bench-board: the board's receive failed: {sent.stderr}")
        results["receives"] = (report(sent.stdout), report(received))
        results["probe"] = [(at, way, bytes.fromhex(datagram))
                            for at, way, datagram in map(json.loads, probe.read_text().splitlines())]
        if (out / source.name).read_bytes() != source.read_bytes():
            raise SystemExit("netblt bench-board: the board's copy differs from the original")
    finally:
        board.terminate()
        board.wait(timeout=120)
    return results


TIMED, FIRST_PASS = "REGISTERS: reads before a timer (time-driven)", "REGISTERS: a buffer's first-pass times"
OPERATION_KINDS = {"CYCLES": TIMED, "STATE": TIMED, "RX_HIGH_ACK": TIMED,
                   "ARG0": "REGISTERS: commands", "ARG1": "REGISTERS: commands", "COMMAND": "REGISTERS: commands",
                   "SEND_DATA": "REGISTERS: control packets out", "SEND_LENGTH": "REGISTERS: control packets out"}
NAMES = {address: name for name, address in ADDRESS.items()}


def link_bytes_by_kind(datagram: bytes) -> Counter[str]:
    """A host-link datagram's bytes by what they are for: its type, or for REGISTERS, each
    operation by the register it touches (requests carry several kinds once joined), the
    header going with the first. A slot's reads (STATUS_SLOT, then its SLOT_ registers)
    are a buffer's first-pass times when they include SLOT_FIRST_AT, else a timer's."""
    header, body = F.decode(datagram)
    kind = F.Type(header.type & ~F.REPLY)
    if kind != F.Type.REGISTERS:
        return Counter({kind.name: len(datagram)})
    kinds, slot_reads = [], []
    for name in [NAMES[op.register] for op in F.decode_operations(body)] + [None]:  # None: the end
        if slot_reads and (name is None or name == "STATUS_SLOT" or not name.startswith("SLOT_")):
            kinds += [FIRST_PASS if "SLOT_FIRST_AT" in slot_reads else TIMED] * len(slot_reads)
            slot_reads = []
        if name == "STATUS_SLOT" or slot_reads and name is not None:
            slot_reads.append(name)
        elif name is not None:
            kinds.append(OPERATION_KINDS.get(name, "REGISTERS: set-up and counters"))
    counts = Counter({k: F.OPERATION.end * n for k, n in Counter(kinds).items()})
    counts[kinds[0] if kinds else "REGISTERS: set-up and counters"] += F.HEADER.end
    return counts


def host_link_bytes(frames) -> Counter[str]:
    """UDP payload bytes on the host link by kind (both ways), from the pcap."""
    counts: Counter[str] = Counter()
    for frame in frames:
        if UDP in frame and F.LINK_PORT in (frame[UDP].sport, frame[UDP].dport):
            counts += link_bytes_by_kind(bytes(frame[UDP].payload)[:frame[UDP].len - 8])
    return counts


# -- 2. the host link at the host's speed -------------------------------------------------


def responder(ports: multiprocessing.Queue) -> None:
    """Answers every host-link request at once, as a board that is never busy would (a
    QUIET upload, not at all)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    ports.put(sock.getsockname()[1])
    while True:
        datagram, source = sock.recvfrom(65536)
        header, body = F.decode(datagram)
        if header.type in (F.Type.ACK, F.Type.EVENTS) or header.flags & F.FLAG_QUIET:
            continue
        parts = F.download_parts(body) if header.type == F.Type.DOWNLOAD else None
        words, step = parts if parts and parts[0] else (0, 1)
        for at in range(0, max(words, 1), step):  # a DOWNLOAD's replies, each its part of the words
            reply = F.Header(header.type | F.REPLY, id=header.id, session=header.session, value=header.value + at)
            sock.sendto(F.encode(reply, bytes(4 * min(step, words - at))), source)


def link_speed(mtu: int, chunk: int = 16 << 10) -> dict[str, tuple[float, float]]:
    """(Mb/s, host CPU seconds per GB) of uploads and downloads of ``chunk`` bytes each,
    through the compiled bulk path as the board data path moves a slot."""
    ports: multiprocessing.Queue = multiprocessing.Queue()
    answering = multiprocessing.Process(target=responder, args=(ports,), daemon=True)
    answering.start()
    link = BoardLink(("127.0.0.1", ports.get()), mtu=mtu)
    try:
        link.open()
        data = os.urandom(chunk)
        out = {}
        for way, move in (("upload", lambda: link.upload(0, data)), ("download", lambda: link.download(0, chunk))):
            cpu, wall = time.process_time(), time.monotonic()
            for _ in range(LINK_BYTES // chunk):
                move()
            cpu, wall = time.process_time() - cpu, time.monotonic() - wall
            out[way] = (LINK_BYTES * 8 / wall / 1e6, cpu * 1e9 / LINK_BYTES)
        return out
    finally:
        link.close()
        answering.kill()


def drain(ports: multiprocessing.Queue) -> None:
    """Takes every datagram and does nothing with it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    ports.put(sock.getsockname()[1])
    buf = bytearray(65536)
    while True:
        sock.recv_into(buf)


def kernel_floor(mtu: int) -> float:
    """Host CPU seconds per GB to move the same bytes in datagrams of the same size through
    one UDP socket and nothing else: no headers built, no replies, 64 datagrams a system
    call (segmentation offload), to a sink in another process. No host link that moves
    the data over a socket can cost less."""
    ports: multiprocessing.Queue = multiprocessing.Queue()
    sink = multiprocessing.Process(target=drain, args=(ports,), daemon=True)
    sink.start()
    size = mtu - F.IP_UDP_HEADERS
    run = min(GSO_MAX_SEGMENTS, GSO_MAX_BYTES // size)
    batch = os.urandom(size * run)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.connect(("127.0.0.1", ports.get()))
    try:
        cpu = time.process_time()
        for _ in range(LINK_BYTES // len(batch)):
            sock.sendmsg([batch], segmented(size))
            time.sleep(0)  # let the sink keep up: a full socket buffer would drop, not measure
        return (time.process_time() - cpu) * 1e9 / (LINK_BYTES // len(batch) * len(batch))
    finally:
        sock.close()
        sink.kill()


# -- 3. the software path ------------------------------------------------------------------


def software_cpu(tmp: Path) -> dict[str, tuple[float, float]]:
    """CPU seconds per GB of ``netblt send`` and ``netblt recv`` on loopback, from their
    reports: (whole process, its data path's threads alone)."""
    source = tmp / "big.bin"
    with open(source, "wb") as f:
        for _ in range(SOFTWARE_BYTES >> 24):
            f.write(os.urandom(1 << 24))
    out = tmp / "software"
    out.mkdir()
    port = free_port()
    recv = started(NETBLT + ["recv", "--listen", f"127.0.0.1:{port}", "--out", str(out), "--json"],
                   "waiting for a sender")
    sent = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{port}", "--json"], capture_output=True,
                          text=True, timeout=600)
    received, _ = recv.communicate(timeout=60)
    per_gb = 1e9 / SOFTWARE_BYTES
    return {end: (r["cpu_seconds"] * per_gb, r["datapath_cpu_seconds"] * per_gb)
            for end, r in (("send", report(sent.stdout)), ("recv", report(received)))}


# -- the figures ----------------------------------------------------------------------------


def control_loop(results: dict) -> list[tuple[int, float, float, float, float, float]]:
    """Per received buffer, in microseconds: (buffer; board time from its last DATA in to
    the COMPLETE push out, and from the OK's last register write in to the OK out, both
    simulated; the host's own work and how long the push waited for it, in host time;
    the download of the buffer's data in simulated time)."""

    port = results["board_port"]
    frames = rdpcap(str(results["pcap"]))
    start = next(i for i, f in enumerate(frames) if UDP in f and f[UDP].dport == port and f.src != MAC_ADDRESS
                 and isinstance(_netblt(f), packets.Open))
    last_data: dict[int, float] = {}
    pushes: list[tuple[float, int]] = []      # (end ns, slot) of COMPLETE events pushed
    downloads: list[tuple[float, str]] = []   # DOWNLOAD requests in and replies out
    ok_writes: list[float] = []               # requests in that end with SEND_LENGTH
    oks: list[tuple[float, int]] = []         # OK packets out: (end ns, buffer)
    for frame in frames[start:]:
        if UDP not in frame:
            continue
        at = float(frame.time) * 1e9
        datagram = bytes(frame[UDP].payload)[:frame[UDP].len - 8]
        inbound = frame.src != MAC_ADDRESS
        if frame[UDP].dport == port and inbound:
            packet = _netblt(frame)
            if isinstance(packet, packets.Data):
                last_data[packet.buffer] = at
        elif frame[UDP].sport == port and not inbound:
            oks += [(at, buffer) for buffer in _oks(_netblt(frame))]
        elif F.LINK_PORT in (frame[UDP].sport, frame[UDP].dport):
            header, body = F.decode(datagram)
            kind = header.type & ~F.REPLY
            if header.type == F.Type.EVENTS:
                events, _ = F.decode_events(body)
                for word in events:
                    event = EVENT_WORD.unpack(word)
                    if event["kind"] == Event.RECEIVED and RECEIVED_FLAGS.unpack(event["flags"])["complete"]:
                        pushes.append((at, event["slot"]))
            elif kind == F.Type.DOWNLOAD:
                downloads.append((at, "in" if inbound else "out"))
            elif header.type == F.Type.REGISTERS and inbound:
                if any(op.register == ADDRESS["SEND_LENGTH"] for op in F.decode_operations(body)):
                    ok_writes.append(at)
    host = _host_times(results["probe"])
    rows = []
    for buffer, data_at in sorted(last_data.items()):
        push = next((at for at, _ in pushes if at > data_at), None)
        ok = next((at for at, number in oks if number == buffer), None)
        if push is None or ok is None or buffer not in host:
            continue
        write = max(at for at in ok_writes if at < ok)
        dl = [at for at, _ in downloads if push < at < write]
        held, work = host[buffer]
        rows.append((buffer, (push - data_at) / 1e3, (ok - write) / 1e3, work * 1e6, held * 1e6,
                     (max(dl) - min(dl)) / 1e3 if dl else 0.0))
    return rows


def _oks(packet) -> list[int]:
    """The buffers a control packet says OK for."""

    if not isinstance(packet, packets.Control):
        return []
    return [message.buffer for message in packet.messages if isinstance(message, packets.Ok)]


def _netblt(frame):

    try:
        return codec.decode(bytes(frame[UDP].payload)[:frame[UDP].len - 8]).packet
    except codec.CodecError:
        return None


def _host_times(log: list[tuple[float, str, bytes]]) -> dict[int, tuple[float, float]]:
    """Per buffer received, host seconds of its control loop: (how long the push of its
    COMPLETE waited before the data path took it, the host's own work: from taking it to
    submitting the first DOWNLOAD, plus from the data being in to submitting the OK)."""

    pushed_at = 0.0
    taken: dict[int, float] = {}
    held: dict[int, float] = {}
    work: dict[int, float] = {}
    data_in: dict[int, float] = {}
    words: list[int] = []
    finished: set[int] = set()
    for at, way, record in log:
        if way == "complete":
            buffer = int.from_bytes(record, "big")
            taken[buffer], held[buffer] = at, at - pushed_at
            continue
        if way == "downloaded":
            data_in[int.from_bytes(record, "big")] = at
            continue
        header, body = F.decode(record)
        if way == "in" and header.type == F.Type.EVENTS:
            pushed_at = at
        elif way == "submit" and header.type == F.Type.DOWNLOAD:
            for buffer in [b for b in taken if b not in work]:
                work[buffer] = at - taken[buffer]
        elif way == "submit" and header.type == F.Type.REGISTERS:
            for op in F.decode_operations(body):
                if op.register == ADDRESS["SEND_DATA"]:
                    words.append(op.value)
                elif op.register == ADDRESS["SEND_LENGTH"]:
                    data, words = struct.pack(f"<{len(words)}I", *words)[:op.value], []
                    try:
                        packet = codec.decode(data).packet
                    except codec.CodecError:
                        continue
                    for buffer in _oks(packet):
                        if buffer in data_in and buffer in work and buffer not in finished:
                            work[buffer] += at - data_in.pop(buffer)
                            finished.add(buffer)
    return {buffer: (held[buffer], work[buffer]) for buffer in finished}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--probed"]:
        return run_probed(argv[1:])
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)

    console = Console()
    with tempfile.TemporaryDirectory(prefix="netblt-bench-board-") as directory:
        tmp = Path(directory)
        console.print(f"1. {TRANSFER >> 20} MiB each way through netblt sim-board (minutes) ...")
        results = through_board(tmp)
        console.print(f"2. the host link against a loopback responder, {LINK_BYTES >> 20} MiB each way ...")
        link = {mtu: link_speed(mtu) | {"floor": kernel_floor(mtu)} for mtu in (1500, 9000)}
        console.print(f"3. the software path on loopback, {SOFTWARE_BYTES >> 20} MiB ...")
        software = software_cpu(tmp)
        frames = rdpcap(str(results["pcap"]))
        loop = control_loop(results)
    print_tables(console, results, frames, MAC_ADDRESS, link, software, loop)
    return 0


def print_tables(console, results, frames, mac, link, software, loop) -> None:
    sender, receiver, _ = results["sends"]
    _, board_receiver = results["receives"]
    table = Table(title=f"Transfers of {TRANSFER} bytes through netblt sim-board")
    for column in ("figure", "board sends", "board receives"):
        table.add_column(column)
    for name, key in (("host-link bytes per data byte", "host_link_bytes"), ("host CPU s (whole run)", "cpu_seconds"),
                      ("seconds", "seconds"), ("steady-state Mb/s", "steady_state_mbps")):
        values = [sender[key], board_receiver[key]]
        if key == "host_link_bytes":
            values = [v / TRANSFER for v in values]
        table.add_row(name, *(f"{v:.4g}" for v in values))
    console.print(table)

    kinds = host_link_bytes(frames)
    moved = 2 * TRANSFER + PACED
    table = Table(title=f"Host-link bytes by kind, all three transfers ({moved} data bytes; UDP payloads, both ways)")
    table.add_column("kind")
    table.add_column("bytes", justify="right")
    table.add_column("per data byte", justify="right")
    for kind, count in sorted(kinds.items(), key=lambda kv: -kv[1]):
        table.add_row(kind, str(count), f"{count / moved:.4f}")
    timed = sum(c for k, c in kinds.items() if "time-driven" in k or k in ("ACK", "STATUS"))
    table.add_row("all but time-driven reads, heartbeats and status", str(sum(kinds.values()) - timed),
                  f"{(sum(kinds.values()) - timed) / moved:.4f}")
    console.print(table)

    table = Table(title="The host link at the host's speed (BoardLink against a loopback responder)")
    for column in ("MTU", "upload Mb/s", "upload CPU s/GB", "download Mb/s", "download CPU s/GB",
                   "the bytes alone through a socket, CPU s/GB"):
        table.add_column(column, justify="right")
    for mtu, ways in link.items():
        table.add_row(str(mtu), *(f"{v:.3g}" for way in ("upload", "download") for v in ways[way]),
                      f"{ways['floor']:.3g}")
    console.print(table)
    table = Table(title=f"The software path on loopback, {SOFTWARE_BYTES} bytes: host CPU s/GB")
    for column in ("end", "whole process (file and SHA-256 included)", "its data path's threads"):
        table.add_column(column, justify="right")
    for end, (whole, data_path) in software.items():
        table.add_row(end, f"{whole:.2f}", f"{data_path:.2f}")
    console.print(table)

    if loop:
        table = Table(title=f"Control loop of the board's received buffers (median of {len(loop)})")
        for column in ("board: last DATA in -> COMPLETE pushed", "board: OK written -> OK out",
                       "host's work: push -> DOWNLOAD, data in -> OK", "push waiting for the host",
                       "the download (simulated)"):
            table.add_column(column, justify="right")
        table.add_row(*(f"{statistics.median(row[i] for row in loop):.1f} us" for i in range(1, 6)))
        console.print(table)

    console.print(pacing_table(results, frames, mac))


def pacing_table(results: dict, frames, mac: str) -> Table:
    """The board's DATA at its wire in the paced send, against its pacer's grid (a new one
    each time the receiver's offers changed the rate)."""
    recv_port, registers, (sender, _, _) = results["paced"][2], results["registers"], results["paced"]
    on_wire, changes = sent(frames, mac, results["board_port"], recv_port,
                            (sender["burst_size"], sender["burst_interval_ms"]))
    intervals, parts = check_transfer(on_wire, changes, registers["BURST_SIZE"], registers["CLOCK_HZ"])
    table = Table(title=f"Pacing of the board's DATA at its wire ({PACED} bytes sent at --rate {PACED_RATE})")
    for column in ("burst / interval", "packets", "on the grid", "waited for the wire", "free to start",
                   "too few to judge", "worst error", "most ahead of the rate", "faults"):
        table.add_column(column, justify="right")
    for interval, pacing in zip(intervals, parts):
        table.add_row(f"{pacing.burst_size} / {interval} cycles",
                      str(pacing.on_grid + pacing.waited + pacing.first_of_buffer + pacing.unjudged),
                      str(pacing.on_grid), str(pacing.waited), str(pacing.first_of_buffer), str(pacing.unjudged),
                      f"{pacing.worst_error:.2f} cycles",
                      str(pacing.most_ahead), str(len(pacing.faults)))
    return table


if __name__ == "__main__":
    sys.exit(main())
