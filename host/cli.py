"""``netblt``: send and receive files with NETBLT, and emulate a WAN between two ends."""

from __future__ import annotations

import argparse
import ipaddress
import json
import signal
import sys
import threading
from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, ProgressColumn, Task, TaskID, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from ..driver.link_mtu import LINK_MTUS
from ..driver.transport import (DEFAULT_PORT, TransportError, default_packet_size, line_data_bps, link_speed_bps,
                                parse_address, show)
from ..formats.host_link import LINK_PORT
from ..protocol.endpoint import DataPathError
from ..protocol.params import MAX_PACKETS_PER_BUFFER, ParamError, Params, Timing, burst_for_rate
from . import board_status, wireshark
from .announce import BORN, PORT
from .auth import Secret, SecretError
from .check import check
from .files import FileError
from .sim_commands import add_netem_arguments, add_sim_board_arguments, run_netem, run_sim_board
from .station import MOST_SENDERS, Station
from .transfer import (IDLE_TICK, PROGRESS_TICK, STAMP_RATE, Gate, Interrupted, Options, Outgoing, Output,
                       TransferReport, TransferError, UsageError, plan, plan_born, send, serve)
from .units import parse_listen_address, parse_port, parse_rate, parse_size, positive

# What a sender proposes by default: a modern gigabit LAN, not 1987's.
SEND_DEFAULTS = dict(buffer_bytes=512 << 10, buffers=16, death_timer=30)
"""Buffers of 512 KiB (whole packets), two of which a bottleneck's queue takes before any OK,
so that an automatic sender starts at its cap (protocol/rate.py ``SMALL_START``), with a
sample of the path each 4.5 ms at a gigabit; 16 outstanding, 8 MiB (docs/benchmarks.md,
issue 68: 1,024-packet buffers, 8 outstanding, before)."""
GIGABIT = 1e9
"""The line an automatic sender's cap is at most (:func:`automatic_cap`)."""
# What a receiver accepts at most by default (it only ever restricts the sender's offer).
RECV_LIMITS = dict(packet_size=65000, buffer_size=16 << 20, burst_size=0xFFFF, burst_interval=1,
                   buffers=32, death_timer=30)
BORN_SHOWN = {"pattern": "the test pattern", "stamps": "the stamp source's words", "port": "the source port's data"}


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad address or prefix {text!r}: use e.g. 192.0.2.7, "
                                         f"10.1.0.0/16 or 2001:db8::/32") from None


def _board_address(text: str) -> tuple[str, int]:
    try:
        return parse_address(text, default_port=LINK_PORT)
    except TransportError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("transfer parameters (a receiver treats them as limits)")
    g.add_argument("--packet-size", type=positive, metavar="BYTES", help="data bytes per DATA packet "
                   "(default: 1448 over UDP, 1456 over IP, 20 fewer to an IPv6 address: a 1500-byte MTU)")
    g.add_argument("--buffer-size", type=parse_size, metavar="BYTES",
                   help="bytes per NETBLT buffer (default: 512K in whole packets)")
    g.add_argument("--burst-size", type=positive, metavar="N", help="packets per burst")
    g.add_argument("--burst-interval", type=positive, metavar="MS", help="ms from burst start to burst start")
    g.add_argument("--buffers", type=positive, metavar="N", help="outstanding buffers (default: 16)")
    g.add_argument("--rate", type=parse_rate, help="the most data rate in bits/s, e.g. 950M, 10M, 64k (burst "
                   "size and interval within 1%%); without it a sender's cap is its interface's line "
                   "(a gigabit's at most), where the default buffers start (larger ones at an eighth "
                   "of it), and the receiver's offers find what the path carries")
    g.add_argument("--transport", choices=("udp", "ip"), default="udp",
                   help="NETBLT inside UDP (default) or natively on IP protocol 30 (IPv4, needs root)")
    g.add_argument("--death-timer", type=positive, metavar="S", help="seconds of silence before "
                   "the peer is declared dead (default: 30)")
    g.add_argument("--data-checksum", action=argparse.BooleanOptionalAction, default=None,
                   help="checksum the data of every DATA packet (default: on over IP, off over UDP, "
                        "whose own checksum covers it)")
    b = parser.add_argument_group("offload (the packets go through a board, or netblt sim-board)")
    b.add_argument("--board", type=_board_address, metavar="ADDR[:PORT]",
                   help=f"the board's host link (port {LINK_PORT}): the board sends or receives the "
                        "packets and this host moves whole buffers")
    b.add_argument("--link-mtu", type=_link_mtu, metavar="BYTES",
                   help="the largest IP datagram between this host and the board (default: 9000 where "
                        "such datagrams reach the board, as a Versa on a jumbo-frame LAN, else 1500; "
                        "checked as the session starts)")
    s = parser.add_argument_group("security")
    s.add_argument("--secret-file", metavar="FILE", help="a shared secret (both ends): the receiver "
                   "admits only senders that prove they hold it, and the data's digest is keyed "
                   "with it (default: $NETBLT_SECRET if set)")
    o = parser.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print each file's report as one JSON line")
    o.add_argument("-q", "--quiet", action="store_true", help="print only errors (and --json)")
    o.add_argument("-v", "--verbose", action="store_true", help="also print drops and duplicates")
    o.add_argument("--metrics", type=parse_listen_address, metavar="ADDR:PORT",
                   help="serve the transfers' figures for Prometheus here while running "
                        "(docs/monitoring.md)")


class _Version(argparse.Action):
    """--version, with the package metadata read only when asked (it costs start-up time)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from importlib.metadata import version
        print(f"netblt {version('netblt')}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="netblt", description=__doc__)
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    send_ = sub.add_parser("send", help="send files, directories or a stream to a waiting receiver",
                           description="Send files, directories (every file below, hidden ones skipped) "
                                       "or a stream (- for standard input, or a pipe), one after another.")
    send_.add_argument("paths", nargs="*", metavar="PATH", help="file, directory, pipe, or - for standard input")
    send_.add_argument("peer", metavar="ADDR[:PORT]", help=f"receiver address (port {DEFAULT_PORT}); "
                       f"IPv6 as [ADDR]:PORT")
    send_.add_argument("--name", help="the name the receiver stores the one file (or stream) under")
    send_.add_argument("--source", choices=BORN, help="instead of PATHs, data born on the board (no byte of it "
                       "crosses this host), --size of it: pattern, the test pattern, which a board's pattern "
                       "source (or the software path) makes and the receiver checks byte for byte; port, what "
                       "feeds the board's source port (a digitizer); stamps, the board's built-in stamp source "
                       "through its source port, numbered words whose gaps the receiver counts")
    send_.add_argument("--size", type=parse_size, metavar="BYTES", help="how much --source sends, e.g. 10G")
    send_.add_argument("--stamp-rate", type=parse_rate, metavar="RATE",
                       help="with --source stamps: what the stamp source offers, in bits/s, waiting for no one "
                            "(default: 100M)")
    send_.add_argument("--local-port", type=parse_port, default=0, metavar="PORT",
                       help=f"send from this UDP port (default: any; with --board, {DEFAULT_PORT})")
    _add_common_options(send_)
    recv = sub.add_parser("recv", help="wait for a sender and write what it sends",
                          description="Receive the files of one netblt send (or, with --keep-serving, "
                                      "of any number of senders, several at once).")
    recv.add_argument("--listen", default=f":{DEFAULT_PORT}", metavar="ADDR:PORT",
                      help=f"where to listen (default: every address, port {DEFAULT_PORT}); IPv6 as [ADDR]:PORT; "
                           "with --board, the board's port")
    recv.add_argument("--out", metavar="PATH", help="output directory (default: here; a trailing / "
                      "insists on a directory), one file, or - for standard output")
    recv.add_argument("--force", action="store_true", help="replace files that exist (never by default)")
    recv.add_argument("--sink", choices=("check", "port"), help="with --board, instead of --out: the board drains "
                      "each buffer, in order, to gateware and nothing crosses to this host or is kept: check, to "
                      "its pattern checker (send --source pattern); port, to the gateware on its sink port "
                      "(docs/sink-port.md; data born on a board)")
    recv.add_argument("--keep-serving", action="store_true", help="serve senders until interrupted, "
                      "up to --max-senders at once, each in a process of its own (over UDP into a directory; "
                      "else one at a time)")
    recv.add_argument("--max-senders", type=positive, metavar="N", help="with --keep-serving: senders served at "
                      f"once, past which an OPEN is refused (default: {MOST_SENDERS})")
    recv.add_argument("--allow", type=_network, action="append", default=[], metavar="ADDR[/PREFIX]",
                      help="admit only senders from here (repeatable)")
    _add_common_options(recv)
    check_ = sub.add_parser("check", help="check that received files are the test pattern",
                            description="Check files received from netblt send --source pattern: each "
                                        "buffer of the file is that buffer's pattern. Exit status 1 if "
                                        "any byte is not.")
    check_.add_argument("files", nargs="+", metavar="FILE")
    check_.add_argument("--buffer-size", type=parse_size, metavar="BYTES", help="the transfer's buffer size "
                        "(default: found from the file, where buffer 1's pattern begins)")
    check_.add_argument("--json", action="store_true", help="print each file's verdict as one JSON line")
    board_status.add_arguments(sub.add_parser("board", help="ask a board (or a simulated one) about itself",
                                              description="Talk to a board over its host link."))
    sim_board = sub.add_parser("sim-board", help="run a simulated board that netblt reaches over loopback",
                               description="Simulate a board's whole design (engine, host link, LiteEth) "
                                           "under Verilator, its Ethernet port bridged to UDP on 127.0.0.1.")
    add_sim_board_arguments(sim_board)
    wireshark.add_arguments(sub.add_parser("wireshark", help="write the Wireshark dissector for NETBLT and the host link",
                                           description="Write a Lua dissector for NETBLT (over IP protocol 30 "
                                                       "and UDP) and the board's host link, made from this "
                                                       "netblt's own formats, for Wireshark and tshark."))
    add_netem_arguments(sub.add_parser("netem", help="relay UDP between two ends through an emulated WAN",
                                 description="Relay UDP between a sender (--listen) and a receiver "
                                             "(--forward), applying an emulated WAN in each direction."))
    return parser


def params_from(args: argparse.Namespace, *, limits: bool, peer: str = "0.0.0.0") -> Params:
    """The proposal (sender, to numeric address ``peer``) or the limits (receiver) the
    options describe."""
    if args.rate is not None and (args.burst_size or args.burst_interval):
        raise ParamError("give --rate or --burst-size/--burst-interval, not both")
    default = RECV_LIMITS["packet_size"] if limits else default_packet_size(peer, args.transport)
    packet_size = args.packet_size or default
    rate_cap = float("inf")
    if limits:
        burst_size = args.burst_size or RECV_LIMITS["burst_size"]
        burst_interval = args.burst_interval or RECV_LIMITS["burst_interval"]
        rate_cap = args.rate or rate_cap
        buffer_size = min(RECV_LIMITS["buffer_size"], packet_size * MAX_PACKETS_PER_BUFFER)
        buffers = RECV_LIMITS["buffers"]
    else:
        if args.burst_size or args.burst_interval:
            burst_size, burst_interval = args.burst_size or 1, args.burst_interval or 1
        else:
            burst_size, burst_interval = burst_for_rate(args.rate or automatic_cap(args, peer, packet_size),
                                                        packet_size)
        buffer_size, buffers = default_buffer_size(packet_size), SEND_DEFAULTS["buffers"]
    checksum = args.data_checksum if args.data_checksum is not None else args.transport == "ip"
    auto = not limits and args.rate is None and not (args.burst_size or args.burst_interval)
    return Params(buffer_size=args.buffer_size or buffer_size, packet_size=packet_size,
                  burst_size=burst_size, burst_interval=burst_interval,
                  max_buffers=args.buffers or buffers, data_checksum=checksum,
                  death_timer=args.death_timer or SEND_DEFAULTS["death_timer"], rate_cap=rate_cap,
                  auto_rate=auto)


def default_buffer_size(packet_size: int) -> int:
    """A sender's buffer size where none is given: :data:`SEND_DEFAULTS`' bytes in whole packets."""
    return packet_size * max(1, SEND_DEFAULTS["buffer_bytes"] // packet_size)


def automatic_cap(args: argparse.Namespace, peer: str, packet_size: int) -> float:
    """The most a sender choosing its own rate sends: the data its Ethernet interface toward
    ``peer`` carries in ``packet_size`` packets, or a gigabit line's where the interface is
    faster or reports no speed (loopback, a tunnel, virtio; a board's wire is a gigabit).

    Before, 950M where no line was known: 0.9% over a gigabit's data in 1,448-byte packets,
    within the rate choice's tenth, so a host that kept up filled the line's queue unseen
    until it overflowed; and 3-4% under it in 4,500- and 9,000-byte ones. A faster
    interface's own line behind a gigabit one lost rate and packets on the veth study
    (910-924 against 971-975 Mb/s at 4,500 and 9,000 bytes), which that study's deep token
    bucket caused: its bursts read 5-12% over the line in the receiver's samples. With a
    shallow bucket the line's timers load the sender's core instead, so this machine
    cannot show a faster cap right either way (docs/benchmarks.md, issue 68)."""
    speed = None if args.board else link_speed_bps(peer)
    return line_data_bps(min(speed or GIGABIT, GIGABIT), peer, args.transport, packet_size)


class BitRateColumn(ProgressColumn):
    """Speed in bits per second, as --rate and the report give it."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed * 8 / 1e6:.1f} Mb/s", style="progress.data.speed")


class Terminal:
    """The CLI's feedback: status lines and a progress bar on stderr, reports on ``out``."""

    def __init__(self, args: argparse.Namespace, out: Console, err: Console) -> None:
        self.args, self.out, self.err = args, out, err
        self.bar: Progress | None = None
        self.tasks: dict[str, TaskID] = {}
        self.show_bar = err.is_terminal and not args.quiet and not args.json
        self.tick = PROGRESS_TICK if self.show_bar else IDLE_TICK

    def status(self, text: str) -> None:
        if not self.args.quiet:
            (self.bar.console if self.bar else self.err).print(f"netblt: {text}", highlight=False,
                                                               soft_wrap=True)

    def progress(self, done: int, total: int | None, task: str = "") -> None:
        if not self.show_bar:
            return
        if self.bar is None:
            self.bar = Progress("[bold]{task.description}", BarColumn(), DownloadColumn(), BitRateColumn(),
                                TimeRemainingColumn(), console=self.err, transient=True)
            self.bar.start()
        if task not in self.tasks:
            self.tasks[task] = self.bar.add_task(task or self.args.command, total=None)
        self.bar.update(self.tasks[task], completed=done, total=total or None)

    def stop(self) -> None:
        if self.bar:
            self.bar.stop()
            self.bar = None
            self.tasks.clear()

    def report(self, report: TransferReport) -> None:
        self.stop()
        if self.args.json:
            print(json.dumps(report.as_json()), file=self.out.file, flush=True)
        elif not self.args.quiet:
            print_report(report, self.out, verbose=self.args.verbose)
        if not report.ok:
            self.err.print(f"netblt: {self.args.command} failed: {report.reason}", highlight=False, soft_wrap=True)
        if report.note:
            self.status(report.note)


def print_report(report: TransferReport, console: Console, *, verbose: bool = False) -> None:
    if not report.established:
        return  # nothing moved: the failure line says it all
    title = f"netblt {report.role} {report.name}: {'OK' if report.ok else 'FAILED'} - {report.reason}"
    table = Table(title=title)
    for column in ("BS/BI", "PSZ", "BFSZ", "XFSZ", "NBUFS", "#LOSS", "#RXM", "DTMOS", "SPEED", "REAL"):
        table.add_column(column, justify="right")
    table.add_row(f"{report.burst_size}/{report.burst_interval_ms}", str(report.packet_size),
                  str(report.buffer_size), f"{report.bytes / 1024:.0f}K",
                  str(report.outstanding_buffers), str(report.packets_lost),
                  str(report.packets_retransmitted), str(report.data_timeouts),
                  f"{report.steady_state_mbps:.1f} Mb/s", f"{report.real_mbps:.1f} Mb/s")
    console.print(table)
    resumed = f" (+{report.resumed_bytes} resumed)" if report.resumed_bytes else ""
    digest = f"  sha256 {report.sha256}" if report.sha256 else ""
    if report.data:
        digest = f"  {BORN_SHOWN[report.data]}" + (", checked" if report.role == "receiver" and report.ok and
                                                   report.data != PORT else "")
    console.print(f"{report.path}{digest}  {report.bytes} bytes{resumed} in {report.seconds} s",
                  soft_wrap=True, highlight=False)
    if report.source_taken or report.source_refused:
        console.print(f"the board's source port: took {report.source_taken} words, refused {report.source_refused} "
                      f"(lost, for a source that cannot wait)", highlight=False)
    if report.stamps_missing:
        console.print(f"stamps missing: {report.stamps_missing} words (the source port refused them)", highlight=False)
    if report.dropped:
        console.print("dropped: " + ", ".join(f"{k} {v}" for k, v in sorted(report.dropped.items())),
                      highlight=False)
    if verbose and report.duplicates:
        console.print(f"duplicates: {report.duplicates} (harmless)", highlight=False)


def _outgoing(args: argparse.Namespace) -> tuple[list[Outgoing], list[str]]:
    """What ``send`` sends: its paths, or ``--size`` bytes of ``--source``."""
    if args.stamp_rate is not None and args.source != "stamps":
        raise UsageError("--stamp-rate is the rate of --source stamps")
    if args.source is None:
        if args.size is not None:
            raise UsageError("--size is how much --source sends; a file's size is its own")
        if not args.paths:
            raise UsageError("give what to send: files, directories, - for standard input, or --source pattern")
        return plan(args.paths, args.name)
    if args.paths:
        raise UsageError(f"--source {args.source} sends instead of files; give no PATH")
    if not args.size:
        raise UsageError(f"--source {args.source} needs --size, e.g. --size 10G")
    return [plan_born(args.source, args.size, args.name)], []


def _small_buffers(buffer_size: int | None, packet_size: int) -> list[str]:
    """A sender's buffers under one packet: allowed (each is one short packet), but each
    costs a round of control messages, so the user hears why the transfer crawls."""
    if buffer_size is None or buffer_size >= packet_size:
        return []
    return [f"--buffer-size {buffer_size} is under one {packet_size}-byte packet: each buffer is one packet "
            f"of {buffer_size} bytes, and the transfer will be slow"]


def _station(args: argparse.Namespace, output: Output) -> bool:
    """Whether ``recv`` serves several senders at once (host/station.py): with --keep-serving,
    over UDP, into a directory; else one at a time, and --max-senders past 1 is an error."""
    if args.max_senders is not None and not args.keep_serving:
        raise UsageError("--max-senders is for --keep-serving (a one-off receiver takes one sender's files)")
    why = ("a board receives for one sender at a time" if args.board is not None else
           "a raw socket (--transport ip) sees every sender's packets" if args.transport == "ip" else
           "several senders at once write into a directory (--out DIR/)" if output.directory is None else None)
    if why and (args.max_senders or 1) > 1:
        raise UsageError(f"--max-senders {args.max_senders}: {why}")
    return args.keep_serving and why is None


def _check(args: argparse.Namespace) -> int:
    """``netblt check``: a verdict line per file, a bar while a large one is read."""
    err = Console(stderr=True)
    status = 0
    for path in args.files:
        with Progress("[bold]check", BarColumn(), DownloadColumn(), TimeRemainingColumn(), console=err,
                      transient=True, disable=not err.is_terminal or args.json) as bar:
            task = bar.add_task("check", total=None)
            try:
                verdict = check(path, args.buffer_size, lambda done, total: bar.update(task, completed=done,
                                                                                       total=total))
            except FileError as exc:
                err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
                status = 1
                continue
        print(json.dumps(verdict.as_json()) if args.json else verdict.text(), flush=True)
        status |= not verdict.ok
    return status


def _link_mtu(text: str) -> int:
    try:
        mtu = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes") from None
    if not LINK_MTUS[0] <= mtu <= LINK_MTUS[1]:
        raise argparse.ArgumentTypeError(f"{mtu} is not an MTU a host link can have ({LINK_MTUS[0]} to {LINK_MTUS[1]})")
    return mtu


def _loopback(host: str) -> bool:
    return bool(host) and ipaddress.ip_address(host.split("%")[0]).is_loopback


def _terminate(signum, frame) -> None:
    raise Interrupted(143, "SIGTERM")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "netem":
        return run_netem(args)
    if args.command == "sim-board":
        return run_sim_board(args)
    if args.command == "board":
        return board_status.run(args, Console(width=max(Console().width, 120)), Console(stderr=True))
    if args.command == "check":
        return _check(args)
    if args.command == "wireshark":
        return wireshark.run(args)
    try:
        where = parse_address(args.peer if args.command == "send" else args.listen)
    except TransportError as exc:
        parser.error(str(exc))
    if args.command == "send" and where[1] == 0:
        parser.error(f"port 0 in {args.peer!r} is no receiver's port")
    data_on_stdout = args.command == "recv" and args.out == "-"
    out = Console(file=sys.stderr if data_on_stdout else sys.stdout, width=max(Console().width, 120))
    err = Console(stderr=True)
    terminal = Terminal(args, out, err)
    try:
        sink = getattr(args, "sink", None)
        if sink and (args.board is None or args.out is not None):
            raise UsageError(f"--sink {sink} needs --board (the board takes the data) and keeps nothing: no --out")
        options = Options(params_from(args, limits=args.command == "recv", peer=where[0] or "0.0.0.0"), kind=args.transport,
                          timing=Timing(), secret=Secret.load(args.secret_file), board=args.board,
                          local_port=getattr(args, "local_port", 0), link_mtu=args.link_mtu,
                          defaults=frozenset(name for name, given in (("buffer_size", args.buffer_size),
                                                                      ("max_buffers", args.buffers)) if given is None),
                          stamp_rate=getattr(args, "stamp_rate", None) or STAMP_RATE, board_sink=sink or "")
        if args.command == "send":
            items, notes = _outgoing(args)
            notes += _small_buffers(args.buffer_size, options.params.packet_size)
        else:
            output = Output(board_sink=sink) if sink else Output.parse(args.out, args.force)
            station = _station(args, output)
    except (ParamError, SecretError) as exc:
        err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
        return 2
    except FileError as exc:
        err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
        return 1 if args.command == "send" and not isinstance(exc, UsageError) else 2
    server, metrics = None, None
    if args.metrics:
        from .metrics import Metrics  # prometheus_client only where asked for
        options.metrics = metrics = Metrics()
        try:
            server = metrics.serve(args.metrics)
        except OSError as exc:
            err.print(f"netblt: error: cannot serve metrics on {show(args.metrics)}: {exc.strerror}",
                      highlight=False, soft_wrap=True)
            return 2
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.command == "send":
            for note in notes:
                terminal.status(note)
            reports, stop = send(items, where, options, terminal)
        else:
            def listening(at: str) -> None:
                most = f", up to {args.max_senders or MOST_SENDERS} at once" if station else ""
                err.print(f"netblt: waiting for a sender on {at} ({args.transport}{most}), writing to {output}",
                          highlight=False, soft_wrap=True)
                if not args.allow and not options.secret and not _loopback(where[0]):
                    terminal.status("anyone who can reach this port can send files here "
                                    "(see --allow and --secret-file)")

            gate = Gate(args.allow, options.secret)
            if station:
                reports, stop = Station(where, output, options, terminal, most=args.max_senders or MOST_SENDERS,
                                        force=args.force, gate=gate, metrics=metrics).serve(listening)
            else:
                reports, stop = serve(where, output, options, terminal, keep_serving=args.keep_serving,
                                      force=args.force, gate=gate, listening=listening)
    except (TransportError, FileError, TransferError, DataPathError) as exc:
        terminal.stop()
        err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
        return 1
    except (KeyboardInterrupt, Interrupted) as exc:
        terminal.stop()
        stop = exc if isinstance(exc, Interrupted) else Interrupted(130, "SIGINT")
        err.print(f"netblt: interrupted ({stop.name})", highlight=False, soft_wrap=True)
        return stop.code
    finally:
        if server:
            server.shutdown()
    terminal.stop()
    if stop is not None:
        if not (reports and reports[-1].reason.endswith(f"interrupted ({stop.name})")):
            err.print(f"netblt: interrupted ({stop.name})", highlight=False, soft_wrap=True)  # while it waited
        return stop.code
    return 0 if reports and all(r.ok for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
