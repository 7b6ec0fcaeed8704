"""File transfers over the software data path, in real time: what the CLI runs.

:func:`send` sends files, directories and streams to a waiting receiver, one
connection per file (WRITE mode); :func:`serve` receives them, one connection at a
time on one socket, refusing a second sender while busy (host/station.py serves several
at once, each with :func:`serve_connection`). Each finished connection gives a
:class:`TransferReport` with RFC 1030's columns.
"""

from __future__ import annotations

import ipaddress
import math
import os
import random
import resource
import secrets
import socket
import stat
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

from ..driver.board import BoardDataPath
from ..driver.realtime import RealTimeDataPath
from ..driver.software import SoftwareDataPath
from ..driver.transport import DEFAULT_PORT, Address, Kind, Transport, host_address, show
from ..formats.born import PatternBuffer, TakenBuffer
from ..protocol import events as ev
from ..protocol.connection import Connection, State
from ..protocol.endpoint import Admission, DataPathError, Endpoint, Usage
from ..protocol.params import Params, Timing, burst_rate_bps
from ..protocol.receiver import Receiver
from . import announce
from .auth import Secret
from .files import (BoardSink, Expectation, FileError, FileSink, FileSource, PatternData, PortData, StampCheck,
                    StdoutSink, StreamSource, name_problem)
from .signals import stops_deferred

STAMP_RATE = 100e6
"""What the board's stamp source offers unless told: bits a second."""
BOARD_SINKS = {"check": "pattern checker", "port": "sink port"}
"""``recv --sink``'s choices: where a receiving board drains each buffer."""
SILENCE_WARNING = 5.0
"""Seconds of silence from the peer before the user hears about it."""
PROGRESS_TICK = 0.1
"""Seconds between a progress bar's updates."""
PUBLISH_INTERVAL = 1.0
"""Seconds between the figures a transfer publishes for ``--metrics``."""
IDLE_TICK = 1.0
"""Seconds between the run loop's looks round when it draws nothing: at most a second
late for the silence warning, and a board's host wakes no more than its events need."""
RECENT_UIDS = 64
"""Finished connections remembered, so a late copy of their OPEN starts nothing."""


class TransferError(Exception):
    """A transfer that cannot start; the message is one line for the user."""


class UsageError(FileError):
    """The paths and options given do not fit together: a bad argument (exit status 2)."""


class Interrupted(Exception):
    """A signal asked the program to stop; ``code`` is its exit status (130, 143)."""

    def __init__(self, code: int, name: str) -> None:
        super().__init__(name)
        self.code, self.name = code, name


class Feedback(Protocol):
    """What the user sees while transfers run (the CLI prints it; tests may ignore it).
    ``tick``: the seconds between progress updates it wants; the run loop wakes that often
    even when nothing happens, so a feedback that draws nothing asks for few."""

    tick: float

    def status(self, text: str) -> None: ...
    def progress(self, done: int, total: int | None, task: str = "") -> None:
        """``task`` names one of several transfers at once (a station's senders)."""
    def report(self, report: TransferReport) -> None: ...


class Publisher(Protocol):
    """Where each transfer's figures go for ``--metrics``: host/metrics.py's collector, or
    from a station's sender process to the station's (host/station.py)."""

    def publish(self, key: int, report: TransferReport) -> None: ...
    def ended(self, key: int, report: TransferReport) -> None: ...


class Quiet:
    tick = IDLE_TICK

    def status(self, text: str) -> None:
        pass

    def progress(self, done: int, total: int | None, task: str = "") -> None:
        pass

    def report(self, report: TransferReport) -> None:
        pass


@dataclass
class Options:
    params: Params
    """The proposal (sender) or the limits (receiver)."""
    kind: Kind = "udp"
    timing: Timing = Timing()
    secret: Secret | None = None
    board: Address | None = None
    """The host link of the board that carries the data (None: the software data path)."""
    local_port: int = 0
    """A sender's own UDP port (0: any; on a board, its NETBLT port)."""
    defaults: frozenset[str] = frozenset()
    """The parameters the user left at their defaults, which a data path may set as suits it
    (a board's sender fills its slots)."""
    link_mtu: int | None = None
    """The largest IP datagram between this host and its board (None: the largest of
    Ethernet's and jumbo frames that reaches it)."""
    stamp_rate: float = STAMP_RATE
    """Bits a second the board's stamp source offers (``--source stamps``)."""
    board_sink: str = ""
    """Receiving on a board: where it drains each buffer instead of this host (``--sink``):
    "check", its pattern checker; "port", its sink port's gateware. Nothing is kept."""
    metrics: Publisher | None = None
    """Where each transfer's figures go for Prometheus (``--metrics``), or nowhere."""


@dataclass
class TransferReport:
    ok: bool
    reason: str
    role: str
    name: str = ""
    """The file's name as announced."""
    path: str = ""
    """Where it was read from or written to."""
    peer: str = ""
    established: bool = False
    bytes: int = 0
    """Bytes moved by this connection (resumed bytes not included)."""
    resumed_bytes: int = 0
    sha256: str = ""
    """The data's SHA-256: the sender's, or the receiver's once verified."""
    data: str = ""
    """Data born on the sender's board, no file's (host/announce.py's ``data=``): the test
    pattern (checked byte for byte), the stamp source's words (their gaps counted) or the
    source port's (not checked)."""
    source_taken: int = 0
    """Sending from a board's source port: words it took, and those its source offered
    that it could not take (lost, for a source that cannot wait), from the source's
    start to the end of the transfer."""
    source_refused: int = 0
    stamps_missing: int = 0
    """Receiving stamps: words their numbers show missing, up to the last that came."""
    burst_size: int = 0
    burst_interval_ms: int = 0
    """The burst size and interval agreed at set-up: the most the sender may use."""
    rate_mbps: float = 0.0
    """The sender's data rate at the end: with no --rate, the receiver's last offer, wherever
    its probing cycle (or a start-up) stood then, not the mean rate (``steady_state_mbps``
    is that); a receiver knows it from the sender's NULL-ACKs."""
    packet_size: int = 0
    buffer_size: int = 0
    outstanding_buffers: int = 0
    packets_lost: int = 0
    packets_retransmitted: int = 0
    data_timeouts: int = 0
    steady_state_mbps: float = 0.0
    real_mbps: float = 0.0
    round_trip_ms: float = 0.0
    """The receiver's smoothed round trip of its control messages (RFC 998's "plus a
    variance" timer's); 0 at a sender, which measures none, or before the first."""
    seconds: float = 0.0
    """Wall time from connection set-up to the end."""
    cpu_seconds: float = 0.0
    """CPU this process used over ``seconds``, all threads."""
    datapath_cpu_seconds: float = 0.0
    """Of which the data path's receive and transmit threads (per-packet work)."""
    wakes: int = 0
    """Times this process went to sleep and was woken (voluntary context switches, all
    threads) over ``seconds``: each costs a host CPU far more than the work it wakes for."""
    data_path: str = "software"
    """What carried the packets: "software" (this host) or "board"."""
    host_link_bytes: int = 0
    """With a board: UDP payload bytes between this host and the board, both ways."""
    host_link_requests: int = 0
    """With a board: host-link requests this host sent, each run once by the board."""
    host_link_slow_path: int = 0
    """With a board: datagrams from it that this host took one at a time in Python (replies
    and pushes; the compiled bulk path takes an upload's and a download's)."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Bad packets counted and dropped, by reason."""
    duplicates: int = 0
    """Harmless second copies of data packets."""
    note: str = ""

    def as_json(self) -> dict:
        return asdict(self)


# -- the run loop -----------------------------------------------------------------------------


def process_usage() -> Usage:
    """This process's CPU seconds and wakes so far."""
    return Usage(time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw)


@contextmanager
def data_path(options: Options, feedback: Feedback, *, peer: Address | None = None,
              listen: Address | None = None) -> Iterator[RealTimeDataPath]:
    """The data path the options name, with its socket or board session, closed after."""
    if options.board is not None:
        port = listen[1] if listen else options.local_port or DEFAULT_PORT
        dp = BoardDataPath.open(options.board, mtu=options.link_mtu, local_port=port, kind=options.kind, peer=peer,
                                notice=feedback.status, drain_on_board=bool(options.board_sink))
        try:
            lacks = dp.drain_lacks(checked=options.board_sink == "check") if options.board_sink else None
            if lacks:
                raise TransferError(f"board {show(options.board)} has no {lacks}: its bitstream was built without one")
            if listen and listen[0] and not host_address(listen).is_unspecified and \
                    host_address(listen) != host_address((dp.address, 0)):
                raise TransferError(f"the board's address is {dp.address}, not {listen[0]}")
            yield dp
        finally:
            dp.close()
        return
    transport = Transport(options.kind, listen or ("", options.local_port), family=_family(peer) if peer else None)
    dp = SoftwareDataPath(transport, peer)
    try:
        yield dp
    finally:
        dp.close()
        transport.close()


def run(endpoint: Endpoint, dp: RealTimeDataPath, feedback: Feedback, total: Callable[[], int | None],
        opening: str = "", listen_until: float | None = None,
        publish: Callable[[], None] | None = None) -> Interrupted | None:
    """Drive one endpoint until its connection finishes, or until ``listen_until`` while
    it still listens. A signal aborts it (telling the peer) and is returned. ``publish``
    runs at each progress tick (the figures for ``--metrics``)."""
    conn = endpoint.conn
    endpoint.start(time.monotonic())
    last_tick, warned, tries = 0.0, None, 1
    try:
        while not endpoint.finished:
            if listen_until is not None and conn.state is State.LISTEN and time.monotonic() > listen_until:
                break
            now = time.monotonic()
            heard = conn.heard_at
            warn_at = heard + SILENCE_WARNING if heard is not None and warned != heard else None
            listening = listen_until if conn.state is State.LISTEN else None
            wakes = [now + feedback.tick, conn.deadline, listening, warn_at]
            wait = max(0.0, min(at for at in wakes if at is not None) - now)
            for event in dp.wait_events(wait):
                endpoint.handle(event, time.monotonic())
            now = time.monotonic()
            if conn.deadline is not None and now >= conn.deadline:
                for event in dp.flush():
                    endpoint.handle(event, now)
                endpoint.timeout(now)
            if opening and conn.state is State.OPEN_SENT and conn.open_tries > tries:
                tries = conn.open_tries
                feedback.status(f"{opening}: {conn.held_by or 'no answer yet'}, try {tries} "
                                f"(giving up in {conn.open_until - now:.0f} s)")
            heard = conn.heard_at
            if heard is not None and now - heard >= SILENCE_WARNING and warned != heard and not conn.finished:
                warned = heard
                left = heard + conn.params.death_timer - now
                feedback.status(f"no packets from the peer for {now - heard:.0f} s; giving up in {left:.0f} s")
            if now - last_tick >= feedback.tick:
                last_tick = now
                feedback.progress(endpoint.progress.bytes_done + endpoint.progress.resumed_bytes, total())
                if publish:
                    publish()
    except DataPathError as exc:
        if exc.tell_peer:
            now = time.monotonic()
            endpoint.run(conn.abort(str(exc), now), now)
        else:
            endpoint.lost_data_path(str(exc))
    except (KeyboardInterrupt, Interrupted) as exc:
        stop = exc if isinstance(exc, Interrupted) else Interrupted(130, "SIGINT")
        dp.interrupt()
        now = time.monotonic()
        endpoint.run(conn.abort(f"interrupted ({stop.name})", now), now)
        return stop
    finally:
        feedback.progress(endpoint.progress.bytes_done + endpoint.progress.resumed_bytes, total())
    return None


def _publisher(metrics: Publisher | None, endpoint: Endpoint, dp: RealTimeDataPath, role: str,
               name: Callable[[], str]) -> Callable[[], None] | None:
    """What publishes an established transfer's figures to ``metrics``, at most once a
    PUBLISH_INTERVAL (a board's counters are read for them over its host link); None
    without metrics."""
    if metrics is None:
        return None
    last = -math.inf

    def publish() -> None:
        nonlocal last
        now = time.monotonic()
        if endpoint.progress.established_at is not None and now - last >= PUBLISH_INTERVAL:
            last = now
            metrics.publish(id(endpoint), _report(endpoint, dp, role, name=name()))
    return publish


def _report(endpoint: Endpoint, dp: RealTimeDataPath, role: str, **fields) -> TransferReport:
    progress, conn = endpoint.progress, endpoint.conn
    result = progress.result
    p = progress.params
    started = progress.established_at
    now = time.monotonic()
    report = TransferReport(
        ok=bool(result and result.ok), reason=result.reason if result else "not finished", role=role,
        established=started is not None, bytes=progress.bytes_done, resumed_bytes=progress.resumed_bytes,
        peer=show(conn.peer) if conn.peer else "", dropped=dp.drop_counts(), duplicates=dp.duplicates,
        data_path=dp.name, host_link_bytes=dp.host_link_bytes, host_link_requests=dp.host_link_requests,
        host_link_slow_path=dp.host_link_slow_path, **fields)
    if started is not None:
        report.seconds = round(now - started, 3)
        used, start = process_usage(), endpoint.usage_start
        report.cpu_seconds = round(used.cpu - start.cpu, 3)
        report.wakes = used.wakes - start.wakes
        report.datapath_cpu_seconds = round(dp.thread_cpu() - dp.cpu_at_configure, 3)
    if p is not None:
        report.burst_size, report.burst_interval_ms = p.burst_size, p.burst_interval
        if conn.role is not None:
            report.rate_mbps = round(burst_rate_bps(*conn.role.burst, p.packet_size) / 1e6, 3)
        report.packet_size, report.buffer_size = p.packet_size, p.buffer_size
        report.outstanding_buffers = p.max_buffers
    if isinstance(conn.role, Receiver) and conn.role.rtt.smoothed is not None:
        report.round_trip_ms = round(conn.role.rtt.smoothed * 1000, 3)
    report.packets_lost = conn.stats.packets_lost
    report.data_timeouts = conn.stats.data_timeouts
    report.packets_retransmitted = conn.stats.packets_resent if role == "receiver" else dp.resent
    report.steady_state_mbps = round(progress.steady_state_bps() / 1e6, 3)
    if progress.done_at and started is not None:
        report.real_mbps = round(8 * progress.bytes_done / max(1e-9, now - started) / 1e6, 3)
    return report


# -- sending ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing:
    """One file to send: ``path`` (None for standard input or data born on a board) under
    the announced ``name``; or ``size`` bytes the data path makes, ``born`` being what
    (host/announce.py's ``BORN``)."""

    path: Path | None
    name: str
    stream: bool = False
    born: str = ""
    size: int = 0


def plan(paths: list[str], name: str | None = None) -> tuple[list[Outgoing], list[str]]:
    """What the command line's paths send, and notes on what they leave out.

    A directory sends every regular file below it, named relative to the directory's
    parent (so ``photos/2024/a.jpg``); hidden entries, symlinks and special files inside
    it are skipped and listed in the notes. A pipe (or ``-``, standard input) is a stream.
    """
    if name is not None and len(paths) > 1:
        raise UsageError("--name names one file; several were given")
    items: list[Outgoing] = []
    notes: list[str] = []
    for text in paths:
        if text == "-":
            items.append(Outgoing(None, name or "stdin", stream=True))
            continue
        path = Path(text)
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            raise FileError(f"cannot read {path}: {exc.strerror}") from None
        if stat.S_ISDIR(mode):
            if name is not None:
                raise UsageError("--name names a file, not a directory")
            items += _walk(path, notes)
        elif stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            items.append(Outgoing(path, name or path.resolve().name, stream=not stat.S_ISREG(mode)))
        else:
            raise FileError(f"{path} is not a file, directory or pipe")
    for item in items:
        if problem := _sender_name_problem(item.name):
            raise FileError(f"cannot send {item.path or '-'} as {item.name!r}: {problem}"
                            + ("; choose another name with --name" if len(items) == 1 else ""))
    if not items:
        raise FileError("nothing to send" + (f" ({'; '.join(notes)})" if notes else ""))
    return items, notes


def plan_born(born: str, size: int, name: str | None) -> Outgoing:
    """``size`` bytes born on the board (``born``: pattern, stamps, port), announced as
    ``name`` (default: what they are)."""
    item = Outgoing(None, name or born, born=born, size=size)
    if problem := _sender_name_problem(item.name):
        raise UsageError(f"cannot send {born} as {item.name!r}: {problem}; choose another name with --name")
    return item


def _walk(root: Path, notes: list[str]) -> list[Outgoing]:
    base = root.resolve()
    items = []
    for folder, folders, files in os.walk(root):
        here = Path(folder)
        for entry in sorted(folders):
            if entry.startswith(".") or (here / entry).is_symlink():
                notes.append(f"skipped {here / entry}/: " + ("hidden" if entry.startswith(".") else "a symlink"))
        folders[:] = sorted(f for f in folders if not f.startswith(".") and not (here / f).is_symlink())
        for entry in sorted(files):
            path = here / entry
            if entry.startswith("."):
                notes.append(f"skipped {path}: hidden")
            elif path.is_symlink() or not path.is_file():
                notes.append(f"skipped {path}: " + ("a symlink" if path.is_symlink() else "not a regular file"))
            else:
                items.append(Outgoing(path, (Path(base.name) / path.relative_to(root)).as_posix()))
    return items


def _sender_name_problem(name: str) -> str | None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "the name is not valid UTF-8"
    if problem := name_problem(name):
        return f"the receiver refuses {problem}"
    return None


def send(items: list[Outgoing], peer: Address, options: Options, feedback: Feedback = Quiet(),
         stdin: int = 0) -> tuple[list[TransferReport], Interrupted | None]:
    """Send each item in turn; stops at the first that fails or at a signal."""
    session = secrets.token_hex(8) if len(items) > 1 else ""
    options = replace(options)  # the board's link MTU, once a session found it, is asked of the next
    reports: list[TransferReport] = []
    for index, item in enumerate(items, 1):
        report, stop = _send_one(item, index, len(items), session, peer, options, feedback, stdin)
        reports.append(report)
        feedback.report(report)
        if stop or not report.ok:
            return reports, stop
    return reports, None


def _send_one(item: Outgoing, index: int, count: int, session: str, peer: Address, options: Options,
              feedback: Feedback, stdin: int) -> tuple[TransferReport, Interrupted | None]:
    uid = random.getrandbits(32)
    shown = str(item.path) if item.path else "-"
    seal = (lambda digest: options.secret.seal(uid, digest)) if options.secret else None
    if item.born:
        shown = f"--source {item.born}"
        source: FileSource | StreamSource | PatternData = (PatternData if item.born == announce.PATTERN
                                                           else PortData)(item.size)
        announced = announce.Announcement(item.name, item.size, None, index, count, session, data=item.born)
    elif item.stream:
        fd = stdin if item.path is None else os.open(item.path, os.O_RDONLY)
        source = StreamSource(lambda n: os.read(fd, n), seal)
        announced = announce.Announcement(item.name, None, None, index, count, session)
    else:
        source = FileSource(item.path, seal)  # hashed while it is sent: the digest follows the data
        announced = announce.Announcement(item.name, source.length, None, index, count, session, source.modified)
    try:
        fields = announced.encode()
        secret = options.secret
        client_string = secret.sign_open(uid, True, fields) if secret else fields
        with data_path(options, feedback, peer=peer) as dp:
            # A board's next session takes this MTU at once, not by probing anew (0.3 s a file
            # of a directory where jumbo frames do not reach the board).
            options.link_mtu = options.link_mtu or dp.link_mtu
            if item.born:
                _start_born(item.born, dp, options)
            params = dp.fit(options.params, sending=True, defaults=options.defaults)
            conn = Connection(active=True, sender=True, params=params, timing=options.timing,
                              transfer_size=source.size, client_string=client_string, uid=uid, peer=dp.peer)
            check = (lambda answer: secret.check_response(uid, client_string, answer)) if secret else None
            endpoint = Endpoint(conn, dp, source=source, check_peer=check, usage=process_usage)
            opening = f"connecting to {show(peer)}" + (f" (file {index} of {count})" if count > 1 else "")
            if options.board:  # the port the peer must answer, which a simulated board may not bridge
                opening += f" through board {show(options.board)} from its NETBLT port {dp.local_port}"
            feedback.status(f"{opening} ...")
            stop = run(endpoint, dp, feedback, lambda: source.size, opening,
                       publish=_publisher(options.metrics, endpoint, dp, "sender", lambda: item.name))
            report = _report(endpoint, dp, "sender", name=item.name, path=shown)
            if options.board and conn.heard_at is None and stop is None:
                report.note = (f"nothing came back to board {show(options.board)}'s NETBLT port "
                               f"{dp.local_port}: the peer must reach that port (a netblt sim-board "
                               "bridges only the NETBLT port it printed: give it as --local-port)")
            if isinstance(source, PortData):
                counts = dp.counters()
                report.source_taken, report.source_refused = counts["SOURCE_TAKEN"], counts["SOURCE_REFUSED"]
        if report.ok:
            report.sha256, report.bytes = source.sha256, source.length  # the trailer is not data
        report.data = announced.data
        if options.metrics:
            options.metrics.ended(id(endpoint), report)
        return report, stop
    finally:
        source.close()


def _start_born(born: str, dp: RealTimeDataPath, options: Options) -> None:
    """Check that the data path makes what ``--source`` names; start the stamp source."""
    kind = PatternBuffer if born == announce.PATTERN else TakenBuffer
    if not dp.makes(kind):
        if options.board is None:
            raise TransferError(f"--source {born} needs a board (--board): the software data path has no source port")
        what = "pattern source" if kind is PatternBuffer else "source port"
        raise TransferError(f"board {show(options.board)} has no {what}: its bitstream was built without one")
    if born == announce.STAMPS:
        dp.start_stamps(options.stamp_rate)


def _family(peer: Address) -> int:
    return socket.AF_INET6 if ":" in peer[0] else socket.AF_INET


# -- receiving ----------------------------------------------------------------------------------


@dataclass
class Output:
    """Where received files go: a directory (default: here), one file, or standard output."""

    directory: Path | None = None
    file: Path | None = None
    stdout: bool = False
    board_sink: str = ""
    """Nothing kept: the receiving board drains the data to its checker or its sink port (``--sink``)."""

    @classmethod
    def parse(cls, text: str | None, force: bool = False) -> Output:
        """``--out``: a trailing slash, or an existing directory, means a directory; ``-`` standard
        output; else one file. Checked now, so a mistake shows before any sender connects."""
        if text is None:
            return cls(directory=Path("."))._checked()
        if text == "-":
            return cls(stdout=True)
        path = Path(text)
        if text.endswith("/") or path.is_dir():
            if not path.is_dir():
                raise FileError(f"output directory {text} does not exist")
            return cls(directory=path)._checked()
        if not path.parent.is_dir():
            raise FileError(f"cannot write {text}: the directory {path.parent} does not exist")
        if path.exists() and not force:
            raise FileError(f"{text} exists (give --force to replace it)")
        return cls(file=path)._checked()

    def _checked(self) -> Output:
        folder = self.directory if self.directory is not None else self.file.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            raise FileError(f"cannot write into {folder}: permission denied")
        return self

    def __str__(self) -> str:
        if self.board_sink:
            return f"nowhere: the board drains it to its {BOARD_SINKS[self.board_sink]}"
        return "standard output" if self.stdout else str(self.file or self.directory)


@dataclass
class Gate:
    """Who may send: an optional allow-list of networks and an optional shared secret."""

    allow: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = field(default_factory=list)
    secret: Secret | None = None
    judged: bool = False
    """The OPENs that reach it were judged already: a station's listener checks each
    (host/station.py), and only its record of the OPENs seen catches a replay."""

    def refusal(self, source: Address, uid: int, client_string: bytes) -> str | None:
        if self.judged:
            return None
        if self.allow and not any(host_address(source) in net for net in self.allow
                                  if net.version == host_address(source).version):
            return f"{show(source)} is not allowed to send here"
        if self.secret:
            return self.secret.check_open(uid, True, client_string)
        return None


class Reception:
    """One receiving connection's client: judges its OPEN, then writes its data."""

    def __init__(self, output: Output, gate: Gate, feedback: Feedback, *, force: bool,
                 session: str | None, finished: deque[tuple[Address, int]]) -> None:
        self.output, self.gate, self.feedback, self.force = output, gate, feedback, force
        self.session, self.finished = session, finished
        self.sink: FileSink | StdoutSink | BoardSink | None = None
        self.announced: announce.Announcement | None = None

    def admit(self, request: ev.Admit) -> Admission:
        why = self._refusal(request)
        if why is not None:
            self.refused(request, why)
            return Admission(refusal=why)
        sink, a = self.sink, self.announced
        size = "a stream" if a.size is None else f"{a.size} bytes"
        more = f" (file {a.index} of {a.count})" if a.count > 1 else ""
        resumed = f", resuming with {sink.resumed_bytes} bytes already here" if sink.resumed_bytes else ""
        self.feedback.status(f"receiving {a.name}{more}, {size}, from {show(request.source)}{resumed}")
        secret = self.gate.secret
        return Admission(held=sink.held, last=sink.total_buffers, resumed_bytes=sink.resumed_bytes,
                         client_string=secret.sign_response(request.uid, request.client_string) if secret
                         else None)

    def refused(self, request: ev.Admit, why: str) -> None:
        self.feedback.status(f"refused {show(request.source)}: {why}")

    def _refusal(self, request: ev.Admit) -> str | None:
        if (request.source, request.uid) in self.finished:
            return "that connection is over"
        if why := self.gate.refusal(request.source, request.uid, request.client_string):
            return why
        try:
            announced = announce.read(request.client_string)
        except ValueError as exc:
            return str(exc)
        if self.session is not None and announced.session != self.session:
            return "busy with another sender's files; try again when they are done"
        if problem := name_problem(announced.name):
            return f"unsafe file name {announced.name!r}: {problem}"
        secret = self.gate.secret
        seal = (lambda digest: secret.seal(request.uid, digest)) if secret else None
        expect = Expectation(announced, seal)
        if self.output.board_sink == "check" and not announced.pattern:
            return "this receiver's board checks the test pattern and keeps nothing: send --source pattern"
        if self.output.board_sink == "port" and not announced.data:
            return ("this receiver's board drains what comes to its sink port and keeps nothing: send data born "
                    "on a board (--source)")
        try:
            if self.output.board_sink:
                self.sink = BoardSink(expect, request.params.buffer_size, checks=self.output.board_sink == "check")
            elif self.output.stdout:
                self.sink = StdoutSink(1, expect, request.params.buffer_size)
            else:
                if self.output.file is not None and announced.count > 1:
                    return f"this receiver writes one file ({self.output.file}); send a single file"
                folder = self.output.directory if self.output.file is None else self.output.file.parent
                name = announced.name if self.output.file is None else self.output.file.name
                root = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    self.sink = FileSink(root, name, expect, request.params.buffer_size, force=self.force)
                finally:
                    os.close(root)
        except FileError as exc:
            return str(exc)
        except OSError as exc:
            return f"cannot write {announced.name}: {exc.strerror}"
        self.announced = announced
        return None

    def write(self, offset: int, data: memoryview) -> None:
        self.sink.write(offset, data)

    def problem(self) -> str | None:
        return self.sink.problem()


def _board_host(link: Address, address: str) -> str:
    """Where senders reach a board: its own address, or, for a simulated board reached on
    loopback (netblt sim-board), the loopback address it bridges its ports on."""
    return link[0] if host_address(link).is_loopback else address


def serve(listen: Address, output: Output, options: Options, feedback: Feedback = Quiet(), *,
          keep_serving: bool = False, force: bool = False, gate: Gate | None = None,
          listening: Callable[[str], None] | None = None) -> tuple[list[TransferReport], Interrupted | None]:
    """Receive files until one sender's files are all in (or, with ``keep_serving``, until
    a signal). A failed transfer ends a one-off receiver; a serving one carries on."""
    gate = gate or Gate(secret=options.secret)
    with data_path(options, feedback, listen=listen) as dp:
        params = dp.fit(options.params, sending=False)
        if listening:
            if options.board is not None:
                listening(f"{show((_board_host(options.board, dp.address), dp.local_port))} "
                          f"(board {show(options.board)})")
            else:
                listening(show((dp.address, dp.local_port)))
        return _serve(dp, params, output, options, feedback, keep_serving, force, gate)


def _serve(dp: RealTimeDataPath, params: Params, output: Output, options: Options, feedback: Feedback,
           keep_serving: bool, force: bool, gate: Gate) -> tuple[list[TransferReport], Interrupted | None]:
    finished: deque[tuple[Address, int]] = deque(maxlen=RECENT_UIDS)
    reports: list[TransferReport] = []
    session: str | None = None
    while True:
        waited = time.monotonic() + options.params.death_timer if session else None
        served = serve_connection(dp, params, output, options, feedback, force, gate, finished, session=session,
                                  listen_until=waited)
        if served.report is None:  # the session's next file never came
            report = TransferReport(
                False, f"the sender's next file did not come within {options.params.death_timer} s", "receiver")
            reports.append(report)
            feedback.report(report)
            return reports, None
        reports += served.established
        if served.stop:
            return reports, served.stop
        announced = served.announced
        if not keep_serving:
            if not served.report.ok or announced is None or announced.index == announced.count:
                return reports, None
            session = announced.session
        dp.reset()


@dataclass
class Served:
    """What :func:`serve_connection` did: its last connection's report (None: no OPEN came
    while listening), the reports of those set up, the signal that stopped it."""

    report: TransferReport | None
    established: list[TransferReport]
    stop: Interrupted | None
    announced: announce.Announcement | None


def serve_connection(dp: RealTimeDataPath, params: Params, output: Output, options: Options, feedback: Feedback,
                     force: bool, gate: Gate, finished: deque[tuple[Address, int]], *, session: str | None = None,
                     listen_until: float | None = None, opening: Sequence[ev.Event] = ()) -> Served:
    """Receive one connection's file on ``dp`` (and the one that replaces it when its
    sender restarts), listening until ``listen_until`` (None: until an OPEN comes), or
    answering ``opening``, the events that came already, an OPEN first."""
    established: list[TransferReport] = []
    reopening = list(opening)
    while True:
        conn = Connection(active=False, sender=False, params=params, timing=options.timing,
                          client_string=b"netblt-recv")
        reception = Reception(output, gate, feedback, force=force, session=session, finished=finished)
        endpoint = Endpoint(conn, dp, sink=reception, admit=reception.admit, refused=reception.refused,
                            usage=process_usage)
        # The OPEN given and what followed it, or the one that replaced the last connection.
        for event in reopening:
            endpoint.handle(event, time.monotonic())
        reopening = []
        stop = run(endpoint, dp, feedback, lambda: reception.announced.size if reception.announced else None,
                   listen_until=listen_until,
                   publish=_publisher(options.metrics, endpoint, dp, "receiver",
                                      lambda: reception.announced.name if reception.announced else ""))
        if not endpoint.finished and stop is None:
            return Served(None, established, None, None)
        # The connection is over and its sender may have been told all is well: a signal
        # waits until the file is in place (its fsync can take seconds) and reported.
        with stops_deferred(dp.interrupt):
            report = _received(endpoint, dp, reception)
            if options.metrics:
                options.metrics.ended(id(endpoint), report)
            if conn.peer is not None:
                finished.append((conn.peer, conn.uid))
            if conn.replaced_by is None:
                if report.established:
                    established.append(report)
                    feedback.report(report)
                return Served(report, established, stop, reception.announced)
        # Its sender restarted and is opening again: serve that one.
        feedback.status(f"{report.name}: {report.reason}" + (f"; {report.note}" if report.note else ""))
        reopening = [conn.replaced_by]
        dp.reset()


def _received(endpoint: Endpoint, dp: RealTimeDataPath, reception: Reception) -> TransferReport:
    """The report of one receiving connection, after verifying and placing its file."""
    sink, announced = reception.sink, reception.announced
    report = _report(endpoint, dp, "receiver", name=announced.name if announced else "",
                     path=sink.shown if sink else "", data=announced.data if announced else "")
    if sink is None:
        return report
    if sink.verdict:
        report.reason = sink.verdict  # found at the last delivery, and told to the sender in a QUIT
    elif report.ok:
        if problem := sink.problem():
            report.ok, report.reason = False, problem
        else:
            report.sha256 = "" if announced.data else sink.verifier.digest.hexdigest()
            if isinstance(sink.verifier.born, StampCheck):
                report.stamps_missing = sink.verifier.born.missing
            report.bytes = sink.verifier.length - report.resumed_bytes  # a stream's trailer is not data
            try:
                report.path = str(sink.commit())
            except FileError as exc:
                report.ok, report.reason = False, str(exc)
    if not report.ok:
        report.note = sink.keep_or_discard() or ""
    if isinstance(sink, FileSink) and sink.replaced_partial:
        report.note = (report.note + "; " if report.note else "") + \
            "an older partial file of different data was overwritten"
    return report
