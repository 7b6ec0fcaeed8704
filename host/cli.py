"""``netblt``: send and receive files with NETBLT, and emulate a WAN between two ends."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from netblt.driver.transport import DEFAULT_PORT, TransportError, parse_address

from .endpoint import Progress as TransferProgress
from .params import MAX_PACKETS_PER_BUFFER, ParamError, Params, Timing, burst_for_rate
from .transfer import Report, TransferError, receive_file, send_file

# What a sender proposes by default: a modern gigabit LAN, not 1987's.
SEND_DEFAULTS = dict(packets_per_buffer=1024, buffers=8, rate=950e6, death_timer=30)
# What a receiver accepts at most by default (it only ever restricts the sender's offer).
RECV_LIMITS = dict(packet_size=65000, buffer_size=16 << 20, burst_size=0xFFFF, burst_interval=1,
                   buffers=32, death_timer=30)
PACKET_SIZE = {"udp": 1448, "ip": 1456}
"""Data bytes that fill a 1500-byte MTU: 20 IP + 8 UDP (or none) + 24 NETBLT header."""

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgG]?)(?:b(?:it)?(?:/s|ps)?)?\s*$")


def parse_rate(text: str) -> float:
    """``950M``, ``1.2G``, ``64k`` or plain bits per second."""
    match = _RATE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"bad rate {text!r}: use e.g. 950M, 1.2G or 64k (bits/s)")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[match.group(2).lower()]
    return float(match.group(1)) * scale


def _positive(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)i?[bB]?\s*", text)
    if not match or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: use e.g. 1448, 64K or 4M")
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[match.group(2).lower()]


def _add_transfer_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("transfer parameters (a receiver treats them as limits)")
    g.add_argument("--packet-size", type=_positive, metavar="BYTES", help="data bytes per DATA packet "
                   "(default: 1448 over UDP, 1456 over IP, to fill a 1500-byte MTU)")
    g.add_argument("--buffer-size", type=_size, metavar="BYTES",
                   help="bytes per NETBLT buffer (default: 1024 packets)")
    g.add_argument("--burst-size", type=_positive, metavar="N", help="packets per burst")
    g.add_argument("--burst-interval", type=_positive, metavar="MS", help="ms from burst start to burst start")
    g.add_argument("--buffers", type=_positive, metavar="N", help="outstanding buffers (default: 8)")
    g.add_argument("--rate", type=parse_rate, help="target rate, e.g. 950M (default); sets burst size "
                   "and interval")
    g.add_argument("--transport", choices=("udp", "ip"), default="udp",
                   help="NETBLT inside UDP (default) or natively on IP protocol 30 (needs root)")
    g.add_argument("--death-timer", type=_positive, metavar="S", help="seconds of silence before "
                   "the peer is declared dead (default: 30)")
    g.add_argument("--data-checksum", action=argparse.BooleanOptionalAction, default=None,
                   help="checksum the data of every DATA packet (default: on over IP, off over UDP, "
                        "whose own checksum covers it)")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="netblt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    send = sub.add_parser("send", help="send a file to a waiting receiver")
    send.add_argument("path", help="file to send")
    send.add_argument("peer", metavar="ADDR[:PORT]", help=f"receiver address (port {DEFAULT_PORT})")
    _add_transfer_options(send)
    recv = sub.add_parser("recv", help="wait for one transfer and write it")
    recv.add_argument("--listen", default=f"0.0.0.0:{DEFAULT_PORT}", metavar="ADDR:PORT",
                      help=f"where to listen (default: 0.0.0.0:{DEFAULT_PORT})")
    recv.add_argument("--out", metavar="PATH", help="output file or directory "
                      "(default: the sender's file name, here)")
    _add_transfer_options(recv)
    from netblt.sim.relay import add_arguments
    add_arguments(sub.add_parser("netem", help="relay UDP between two ends through an emulated WAN"))
    return parser


def _address(parser: argparse.ArgumentParser, text: str) -> tuple[str, int]:
    try:
        return parse_address(text)
    except TransportError as exc:
        parser.error(str(exc))


def params_from(args: argparse.Namespace, *, limits: bool) -> Params:
    """The proposal (sender) or the limits (receiver) the options describe."""
    if args.rate is not None and (args.burst_size or args.burst_interval):
        raise ParamError("give --rate or --burst-size/--burst-interval, not both")
    packet_size = args.packet_size or (RECV_LIMITS["packet_size"] if limits else PACKET_SIZE[args.transport])
    if args.rate is not None or not limits and not (args.burst_size or args.burst_interval):
        burst_size, burst_interval = burst_for_rate(args.rate or SEND_DEFAULTS["rate"], packet_size)
    else:
        burst_size = args.burst_size or (RECV_LIMITS["burst_size"] if limits else 1)
        burst_interval = args.burst_interval or 1
    if limits:
        buffer_size = min(RECV_LIMITS["buffer_size"], packet_size * MAX_PACKETS_PER_BUFFER)
        buffers = RECV_LIMITS["buffers"]
    else:
        buffer_size, buffers = packet_size * SEND_DEFAULTS["packets_per_buffer"], SEND_DEFAULTS["buffers"]
    checksum = args.data_checksum if args.data_checksum is not None else args.transport == "ip"
    return Params(buffer_size=args.buffer_size or buffer_size, packet_size=packet_size,
                  burst_size=burst_size, burst_interval=burst_interval,
                  max_buffers=args.buffers or buffers, data_checksum=checksum,
                  death_timer=args.death_timer or SEND_DEFAULTS["death_timer"])


class ProgressBar:
    """A rich progress bar on stderr while a transfer runs; nothing when not a terminal."""

    def __init__(self, console: Console, label: str) -> None:
        self.bar = Progress("[bold]{task.description}", BarColumn(), DownloadColumn(),
                            TransferSpeedColumn(), TimeRemainingColumn(), console=console, transient=True)
        self.task = self.bar.add_task(label, total=None)
        self.bar.start()

    def __call__(self, progress: TransferProgress, total: int) -> None:
        self.bar.update(self.task, completed=progress.bytes_done, total=total or None)

    def stop(self) -> None:
        self.bar.stop()


def print_report(report: Report, console: Console) -> None:
    table = Table(title=f"netblt {report.role}: {'OK' if report.ok else 'FAILED'} - {report.reason}")
    for column in ("BS/BI", "PSZ", "BFSZ", "XFSZ", "NBUFS", "#LOSS", "#RXM", "DTMOS", "SPEED", "REAL"):
        table.add_column(column, justify="right")
    table.add_row(f"{report.burst_size}/{report.burst_interval_ms}", str(report.packet_size),
                  str(report.buffer_size), f"{report.bytes / 1024:.0f}K",
                  str(report.outstanding_buffers), str(report.packets_lost),
                  str(report.packets_retransmitted), str(report.data_timeouts),
                  f"{report.steady_state_mbps:.1f} Mb/s", f"{report.real_mbps:.1f} Mb/s")
    console.print(table)
    console.print(f"{report.path}  sha256 {report.sha256}  {report.bytes} bytes in {report.seconds} s",
                  soft_wrap=True)
    if report.dropped:
        console.print("dropped: " + ", ".join(f"{k} {v}" for k, v in sorted(report.dropped.items())))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "netem":
        from netblt.sim.relay import run_from_args
        return run_from_args(args)
    out, err = Console(width=max(Console().width, 120)), Console(stderr=True)
    where = _address(parser, args.peer if args.command == "send" else args.listen)
    bar = None
    try:
        params = params_from(args, limits=args.command == "recv")
        bar = ProgressBar(err, args.command) if err.is_terminal and not args.json else None
        if args.command == "send":
            report = send_file(args.path, where, params, kind=args.transport,
                               timing=Timing(), tick=bar)
        else:
            report = receive_file(
                where, args.out, params, kind=args.transport, timing=Timing(),
                tick=bar, listening=lambda where: err.print(f"netblt: waiting for a sender on {where} "
                                                            f"({args.transport})", highlight=False,
                                                            soft_wrap=True))
    except (ParamError, TransportError, TransferError) as exc:
        if bar:
            bar.stop()
        err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
        return 2 if isinstance(exc, ParamError) else 1
    if bar:
        bar.stop()
    if args.json:
        print(json.dumps(report.as_json()))
    else:
        print_report(report, out)
    if not report.ok:
        err.print(f"netblt: {args.command} failed: {report.reason}", highlight=False, soft_wrap=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
