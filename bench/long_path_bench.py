"""A long path in simulated time: an offloaded transfer through ``netblt sim-board`` and
a WAN of a given round trip and loss, measured at the board's wire.

    python -m netblt.bench.long_path_bench                  (make bench-long-path)
    python -m netblt.bench.long_path_bench --rtt 600ms --size 128M
    python -m netblt.bench.long_path_bench --source pattern --size 16M   (data born on the board)

The board (the Versa's design, its slots in DRAM on LiteDRAM's model) and the WAN run
in simulated time; the board's host and its software peer, the real ``netblt send
--board`` and ``netblt recv``, run in real time. Free-running, the simulation is some
270 times slower than real time idle and 310 with traffic (``make bench-sim``; 4,500
and twice that when cocotb drove its cycles), and the peer's rate
choice, which measures in real time, reads each slowdown as a bottleneck and lowers its
offer; so the board is held at one pace (``sim-board --pace``, 1,000 by default),
slower than it ever runs. The peer then sees the round trip and the rate scaled by the
same steady factor, and rate x round trip, the data that must be outstanding, is the
same in both (docs/architecture.md). A 64 MiB run at 100 ms takes some 18 minutes
(three hours at 10,000, the pace cocotb's simulation needed).

Every figure is read from the pcap of the board's wire, stamped in simulated
nanoseconds: when the board's OPEN left and its peer's last OK came back, its DATA
(first and resent), the outstanding data (sent and not yet OKed), and the uploads from
its host on the same port.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table
from scapy.utils import RawPcapReader

from ..driver.board import DATA_SHARE
from ..driver.board_session import WIRE_BPS
from ..formats import host_link as F
from ..host.units import parse_duration, parse_probability, parse_rate, parse_size, positive
from ..hw.boards import BOARDS
from ..protocol import codec, packets
from .board_bench import NETBLT, free_port, report
from .wire import FCS, PREAMBLE_AND_GAP

FRAME_OVERHEAD = PREAMBLE_AND_GAP + FCS
"""Bytes on the wire around each frame the pcap holds."""
ETHERNET_HEADER = 14
LINKTYPE_ETHERNET = 1
MOST_BPS = DATA_SHARE * WIRE_BPS
"""The most a board paces DATA at."""
PROGRESS_EVERY = 60.0
"""Seconds of real time between progress lines."""


@dataclass
class WireTimes:
    """What the pcap shows of one transfer, in simulated seconds."""

    open_at: float = 0.0
    response_at: float = 0.0
    last_ok_at: float = 0.0
    first_data_at: float = 0.0
    last_data_at: float = 0.0
    data_frames: int = 0
    resent: int = 0
    data_bytes: int = 0
    """Payload of every first sending of a packet."""
    most_outstanding: int = 0
    """The most payload bytes sent and not yet OKed at once."""
    upload_bytes: int = 0
    """Data the host uploaded to the board."""
    first_upload_at: float = 0.0
    last_upload_at: float = 0.0
    wire_bytes_out: int = 0
    """Every byte the board put on its wire (frames and their overhead) while sending DATA."""
    data_starts: list[float] = field(default_factory=list)
    """When each DATA frame went out."""

    @property
    def data_seconds(self) -> float:
        return self.last_data_at - self.first_data_at

    @property
    def total_seconds(self) -> float:
        return self.last_ok_at - self.open_at

    @property
    def paced_bps(self) -> float:
        """Payload bits per second at the median gap between DATA frames (a full packet's)."""
        gap = statistics.median(b - a for a, b in zip(self.data_starts, self.data_starts[1:]))
        return self.data_bytes / len(self.data_starts) * 8 / gap if gap else 0.0


def udp(packet: bytes) -> tuple[int, int, bytes] | None:
    """(source port, destination port, payload) of an IPv4 UDP packet."""
    if len(packet) < 28 or packet[0] >> 4 != 4 or packet[9] != 17:
        return None
    ihl = (packet[0] & 0xF) * 4
    sport, dport, length = struct.unpack_from("!HHH", packet, ihl)
    return sport, dport, packet[ihl + 8:ihl + length]


def read_wire(pcap: Path, board_port: int) -> WireTimes:
    """The transfer between the board's NETBLT port and its peer, from ``pcap``: Ethernet
    frames (the design under Verilator's wire) or IP packets (the model's, linktype 101)."""
    wire, sent, oked, buffer_bytes = WireTimes(), set(), set(), Counter()
    outstanding = 0
    reader = RawPcapReader(str(pcap))
    scale = 1e-9 if reader.nano else 1e-6
    ethernet = ETHERNET_HEADER if reader.linktype == LINKTYPE_ETHERNET else 0
    for frame, meta in reader:
        at = meta.sec + meta.usec * scale
        if ethernet and frame[12:14] != b"\x08\x00":
            continue
        parts = udp(frame[ethernet:])
        if parts is None:
            continue
        sport, dport, payload = parts
        from_board = sport in (board_port, F.LINK_PORT)
        if dport == F.LINK_PORT and not from_board:
            if len(payload) > 1 and payload[1] == F.Type.UPLOAD:
                wire.upload_bytes += len(payload) - F.HEADER.end
                wire.first_upload_at, wire.last_upload_at = wire.first_upload_at or at, at
            continue
        if board_port not in (sport, dport):
            continue
        try:
            packet = codec.decode(payload).packet
        except codec.CodecError:
            continue
        if from_board:
            if wire.first_data_at:
                wire.wire_bytes_out += len(frame) + ETHERNET_HEADER - ethernet + FRAME_OVERHEAD
            if isinstance(packet, packets.Open) and not wire.open_at:
                wire.open_at = at
            elif isinstance(packet, packets.Data):
                wire.first_data_at = wire.first_data_at or at
                wire.last_data_at = at
                wire.data_starts.append(at)
                wire.data_frames += 1
                key = (packet.buffer, packet.packet)
                if key in sent:
                    wire.resent += 1
                else:
                    sent.add(key)
                    buffer_bytes[packet.buffer] += len(packet.payload)
                    wire.data_bytes += len(packet.payload)
                    outstanding += len(packet.payload)
                    wire.most_outstanding = max(wire.most_outstanding, outstanding)
        elif isinstance(packet, packets.Response) and not wire.response_at:
            wire.response_at = at
        elif isinstance(packet, packets.Control):
            for message in packet.messages:
                if isinstance(message, packets.Ok) and message.buffer not in oked:
                    oked.add(message.buffer)
                    outstanding -= buffer_bytes[message.buffer]
                    wire.last_ok_at = at
    return wire


def start_board(args: argparse.Namespace, pcap: Path) -> tuple[subprocess.Popen, int, int, float]:
    """``netblt sim-board`` running: its process, host-link port, NETBLT port, and how
    many times slower than real time it said it runs."""
    held = ["--model"] if args.model else ["--pace", str(args.pace)]
    board = subprocess.Popen(NETBLT + ["sim-board", "--board", args.board, "--slots", "dram", *held,
                                       "--wan-delay", f"{args.rtt / 2}s", "--wan-loss", str(args.loss),
                                       "--wan-seed", str(args.seed), "--pcap", str(pcap)],
                             text=True, stdout=subprocess.PIPE)
    lines = [board.stdout.readline() for _ in range(4)]
    started = "in real time" in lines[3] if args.model else "slower than real time" in lines[3]
    if not lines[1].startswith("netblt ") or not started:
        board.kill()
        raise SystemExit("netblt bench-long-path: netblt sim-board did not start (its error is above)")
    link, port = (int(line.split()[1].rsplit(":", 1)[1]) for line in lines[:2])
    slower = 1.0 if args.model else float(lines[3].split()[2].replace(",", ""))
    return board, link, port, slower


def size_of(*paths: Path) -> int:
    """The size of the first of ``paths`` that exists (0 if none does)."""
    for path in paths:
        try:
            return path.stat().st_size
        except FileNotFoundError:
            continue
    return 0


def transfer(args: argparse.Namespace, tmp: Path, link: int, port: int, death: int, slower: float) -> dict:
    """The board sends ``args.size`` random bytes (or, ``--source pattern``, the test
    pattern its pattern source makes) to ``netblt recv``: the sender's report, once the
    copy is checked byte for byte."""
    source, out = tmp / "data.bin", tmp / "out"
    out.mkdir()
    born = args.source == "pattern"
    if not born:
        with source.open("wb") as f:
            for _ in range(0, args.size, 1 << 20):
                f.write(os.urandom(min(1 << 20, args.size - f.tell())))
    options = ["--buffers", str(args.buffers), "--death-timer", str(death), "--json"]
    recv_port, recv_log = free_port(), tmp / "recv.log"
    # The receiver's messages to a file: over hours its warnings would fill a pipe.
    with recv_log.open("w") as log:
        recv = subprocess.Popen(NETBLT + ["recv", "--listen", f"127.0.0.1:{recv_port}", "--out", str(out), *options],
                                text=True, stdout=subprocess.PIPE, stderr=log)
    while "waiting for a sender" not in recv_log.read_text():
        if recv.poll() is not None:
            raise SystemExit(f"netblt bench-long-path: netblt recv did not start: {recv_log.read_text()}")
        time.sleep(0.1)
    options.append("-q")
    what = ["--source", "pattern", "--size", str(args.size)] if born else [str(source)]
    send = subprocess.Popen(NETBLT + ["send", *what, f"127.0.0.1:{recv_port}", "--board", f"127.0.0.1:{link}",
                                      "--local-port", str(port), "--buffer-size", str(args.buffer_size),
                                      "--rate", f"{args.rate:.0f}", *options],
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    name = "pattern" if born else "data.bin"
    started, partial, whole = time.monotonic(), out / f"{name}.partial", out / name
    while send.poll() is None:
        time.sleep(PROGRESS_EVERY)
        got = size_of(partial, whole)  # the receiver renames its copy when it is whole
        print(f"  {(time.monotonic() - started) / 60:.0f} min: the peer's copy reaches {got / 2**20:.1f} of "
              f"{args.size / 2**20:g} MiB", flush=True)
    sent_out, sent_err = send.communicate()
    # The sender is done once its dally ends: 8 of the peer's control timers, which the
    # protocol's fields cap far below a round trip seen `slower` times longer. The peer
    # finishes when the sender's acknowledgement of its last OK reaches it, up to a
    # round trip later.
    try:
        recv.communicate(timeout=2 * args.rtt * slower + 120)
    except subprocess.TimeoutExpired:
        recv.kill()
        recv.communicate()
    # The receiver checked the pattern byte for byte itself; a file, here.
    copied = (out / name).exists() and (born or (out / name).read_bytes() == source.read_bytes())
    if send.returncode or recv.returncode or not copied:
        raise SystemExit(f"netblt bench-long-path: the transfer failed (sender {send.returncode}, receiver "
                         f"{recv.returncode}, copy {'exact' if copied else 'missing or different'}): "
                         f"{sent_err}{recv_log.read_text()[-2000:]}")
    return report(sent_out)


def stop(board: subprocess.Popen) -> str:
    """Its summary (the WAN's counts among them)."""
    board.terminate()
    return board.communicate(timeout=300)[0]


def print_results(console: Console, args: argparse.Namespace, wire: WireTimes, sender: dict, slower: float,
                  summary: str) -> None:
    table = Table(title=f"{args.size / 2**20:g} MiB from a {args.board} board's DRAM over a "
                        f"{args.rtt * 1000:.0f} ms round trip, {args.loss:.2%} loss each way (simulated time)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    share = lambda bps: f"{bps / 1e6:.1f} Mb/s ({bps / WIRE_BPS:.1%} of the line)"  # noqa: E731
    table.add_row("OPEN out to RESPONSE in", f"{(wire.response_at - wire.open_at) * 1000:.1f} ms")
    table.add_row("first DATA to last DATA", f"{wire.data_seconds * 1000:.1f} ms")
    table.add_row("DATA paced at (median gap)", share(wire.paced_bps))
    table.add_row("goodput over the DATA", share(wire.data_bytes * 8 / wire.data_seconds))
    table.add_row("OPEN out to the last OK in", f"{wire.total_seconds * 1000:.1f} ms")
    table.add_row("goodput over the whole transfer", share(args.size * 8 / wire.total_seconds))
    table.add_row("the board's wire, out, while sending", f"{wire.wire_bytes_out * 8 / wire.data_seconds / 1e6:.1f} Mb/s")
    upload_seconds = wire.last_upload_at - wire.first_upload_at
    table.add_row("uploads from its host, in", f"{wire.upload_bytes * 8 / upload_seconds / 1e6:.1f} Mb/s "
                                               f"over {upload_seconds * 1000:.0f} ms" if upload_seconds > 0 else
                  f"{wire.upload_bytes} bytes: data born on the board")
    table.add_row("DATA frames (resent)", f"{wire.data_frames} ({wire.resent})")
    table.add_row("most outstanding (sent, not OKed)", f"{wire.most_outstanding / 2**20:.1f} MiB; "
                                                       f"rate x round trip at {MOST_BPS / 1e6:.0f} Mb/s: "
                                                       f"{MOST_BPS / 8 * args.rtt / 2**20:.1f} MiB")
    held = next((line for line in summary.splitlines() if line.startswith("held at")), "held at 1:1 (the model)")
    table.add_row("simulated against real time", held.removeprefix("held at "))
    agreed = sender["burst_size"] * sender["packet_size"] * 8 / (sender["burst_interval_ms"] / 1000) * slower
    table.add_row("sender's report", f"{sender['buffer_size']} B buffers, {sender['packets_retransmitted']} resent, "
                                     f"rate at the end {share(agreed)} in the board's time")
    console.print(table)
    console.print("\n".join(line for line in summary.splitlines() if "WAN" in line or "NETBLT datagrams" in line))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--board", default="versa_ecp5", choices=sorted(BOARDS),
                        help="whose design and DRAM geometry (default: versa_ecp5)")
    parser.add_argument("--rtt", type=parse_duration, default=0.1, metavar="TIME", help="round trip (default: 100ms)")
    parser.add_argument("--loss", type=parse_probability, default=0.001, metavar="P",
                        help="loss each way (default: 0.1%%)")
    parser.add_argument("--size", type=parse_size, default=64 << 20, metavar="BYTES", help="default: 64M")
    parser.add_argument("--buffer-size", type=parse_size, default=4 << 20, metavar="BYTES",
                        help="NETBLT buffer (default: 4M, the Versa's DRAM slot)")
    parser.add_argument("--buffers", type=positive, default=16, metavar="N", help="outstanding (default: 16, every slot)")
    parser.add_argument("--rate", type=parse_rate, default=950e6, help="asked of the board (default: 950M; it allows 90%% of its wire)")
    parser.add_argument("--pace", type=positive, default=1000, metavar="N",
                        help="the simulation held at N times slower than real time, slower than it runs "
                             "with traffic (default: 1000)")
    parser.add_argument("--seed", type=int, default=1, metavar="N", help="the WAN's loss (default: 1)")
    parser.add_argument("--source", choices=("file", "pattern"), default="file",
                        help="what the board sends: a file from its host (default), or the test pattern its "
                             "pattern source makes (data born on the board: no uploads)")
    parser.add_argument("--model", action="store_true",
                        help="the board's functional model in real time, with its WAN (the figure the design's "
                             "is held to), instead of the design under Verilator")
    parser.add_argument("--pcap", type=Path, metavar="FILE", help="keep the board's wire here (default: a temporary file)")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    with tempfile.TemporaryDirectory(prefix="netblt-bench-long-path-") as directory:
        tmp = Path(directory)
        pcap = args.pcap or tmp / "wire.pcap"
        board, link, port, slower = start_board(args, pcap)
        # The longest silence is about a round trip, seen `slower` times longer.
        death = min(0xFFFF, max(600, round(20 * args.rtt * slower)))
        minutes = (args.size * 8 / MOST_BPS + 4 * args.rtt) * slower / 60
        console.print(f"{args.size / 2**20:g} MiB through the simulated board at 1:{slower:,.0f} of real time: "
                      f"{minutes:.0f} minutes or more ...")
        try:
            sender = transfer(args, tmp, link, port, death, slower)
        finally:
            summary = stop(board)
        wire = read_wire(pcap, port)
    print_results(console, args, wire, sender, slower, summary)
    if args.json:
        figures = {key: value for key, value in wire.__dict__.items() if key != "data_starts"}
        print(json.dumps({"rtt": args.rtt, "loss": args.loss, "size": args.size, **figures}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
