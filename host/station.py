"""A receiving station: several senders at once, each served by a process of its own.

``netblt recv --keep-serving`` over UDP into a directory. The station's socket, the
listener, takes each OPEN and hands it to a process started for that sender, whose
socket shares the port (SO_REUSEPORT) and is connected to the sender: the kernel brings
a connected socket its sender's datagrams and every other source's to the listener (what
it handed the new socket before it was connected, the process hands the listener). So
each sender's packets are read, placed, hashed and written on a core of their own
(one core carries about a gigabit of the software path), and what one sender does, a
stall, an abort, a hostile packet, a full disk, or its process's crash, stays in its
process. Past ``--max-senders`` the listener answers an OPEN with REFUSED.

The listener judges each OPEN's address and secret itself before starting a process,
so that a flood of unwelcome OPENs starts none, and a replayed OPEN is caught by the one
record of those seen. The processes tell the station what the user sees (status lines,
progress, each report) and the figures for ``--metrics`` over a pipe.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import signal
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING

from ..driver.control_codec import ControlCodec
from ..driver.framing import is_data
from ..driver.software import SoftwareDataPath
from ..driver.transport import Address, Transport, TransportError, show
from ..protocol import events as ev
from ..protocol.packets import Open, Refused
from .signals import STOPPING, stops_deferred
from .transfer import (PUBLISH_INTERVAL, RECENT_UIDS, Feedback, Gate, Interrupted, Options, Output, TransferReport,
                       serve_connection)

if TYPE_CHECKING:
    from .metrics import Metrics

MOST_SENDERS = 8
"""Senders a station serves at once unless told (``--max-senders``)."""
GRACE = 2.0
"""Seconds the sender processes get, after a signal, to tell their senders and report."""
PLACING = 60.0
"""Seconds more for those still putting a received file in place (a large file's sync)."""
HELD_MOST = 64
"""Datagrams the listener holds for a sender whose process is starting."""
READ_AT_MOST = 256
"""Reads of the listener's socket before a process takes over its sender, at most."""
LOOK = 0.5
"""Seconds between the listener's looks round when nothing arrives."""


CLI = f"{__package__}.cli"
"""Loaded in the fork server with this module. Each sender's process runs the station's
main module again (multiprocessing's fix-up of __main__: the CLI, or its console script
that imports it); with the CLI and what it imports (argparse, rich) loaded beforehand that
costs a few milliseconds, not the 40 each connection waited for it. runpy then warns that
the module it runs was imported already, as it was on purpose: the process never uses
what that run defines."""
warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy",
                        message=re.escape(f"'{CLI}' found in sys.modules"))


@dataclass(frozen=True)
class Assignment:
    """What a sender's process is given: the OPEN the listener took, and where and how to receive."""

    opening: bytes
    source: Address
    port: Address
    """The station's address and port, which the process's socket shares."""
    family: int
    options: Options
    output: Output
    gate: Gate
    force: bool
    tick: float
    metrics: bool


class Relay:
    """A sender process's feedback and ``--metrics`` figures, sent to the station."""

    def __init__(self, channel: Connection, tick: float) -> None:
        self.channel, self.tick = channel, tick

    def status(self, text: str) -> None:
        self.channel.send(("status", text))

    def progress(self, done: int, total: int | None, task: str = "") -> None:
        self.channel.send(("progress", done, total))

    def report(self, report: TransferReport) -> None:
        self.channel.send(("report", report))

    def publish(self, key: int, report: TransferReport) -> None:
        self.channel.send(("publish", report))

    def ended(self, key: int, report: TransferReport) -> None:
        self.channel.send(("ended", report))


def serve_sender(task: Assignment, channel: Connection) -> None:
    """A sender's process: its own socket on the station's port, kept to that sender, and
    one connection served on it as a one-off receiver serves it."""
    _stop_once()
    relay = Relay(channel, task.tick)
    try:
        try:
            code = _serve_on_own_socket(task, channel, relay)
        finally:  # the connection is over: a signal now has nothing to stop, and raised past
            for signum in STOPPING:  # the handlers below it would end the process unreported
                signal.signal(signum, signal.SIG_IGN)
    except TransportError as exc:
        relay.status(f"cannot serve {show(task.source)}: {exc}")
        code = 1
    except (Interrupted, KeyboardInterrupt) as exc:  # a signal outside the run loop: nothing to tell
        code = exc.code if isinstance(exc, Interrupted) else 130
    except (EOFError, OSError):
        return  # the station is gone: nobody to tell
    try:
        channel.send(("done", code))
    except OSError:
        pass


def _serve_on_own_socket(task: Assignment, channel: Connection, relay: Relay) -> int:
    """The connection's exit status: 0, or the signal's that stopped it."""
    options = replace(task.options, metrics=relay if task.metrics else None)
    transport = Transport("udp", task.port, task.family, share="join")
    try:
        early = transport.keep_to(task.source)
        ours = [datagram for datagram, source in early if source == task.source]
        channel.send(("ready", [(datagram, source) for datagram, source in early if source != task.source]))
        came_since: list[bytes] = channel.recv()
        dp = SoftwareDataPath(transport)
        try:
            for datagram in [task.opening, *ours, *came_since]:
                dp.arrived(datagram, task.source)
            came = dp.wait_events(0)  # with what its socket brought since it was connected
            first = next((at for at, event in enumerate(came)
                          if isinstance(event, ev.PacketReceived) and isinstance(event.packet, Open)), None)
            if first is not None:
                came.insert(0, came.pop(first))  # the OPEN first: a listening end ignores all else
            served = serve_connection(dp, dp.fit(options.params, sending=False), task.output, options, relay,
                                      task.force, task.gate, deque(), listen_until=time.monotonic(), opening=came)
            return served.stop.code if served.stop else 0
        finally:
            dp.close()
    finally:
        transport.close()


def refusal_kind(why: str) -> str:
    """A refusal's kind, for a metric's label: a few words, never the sender's address."""
    for kind, sign in (("busy", "busy:"), ("over", "connection is over"), ("not allowed", "is not allowed"),
                       ("authentication", "authentication")):
        if sign in why:
            return kind
    return "other"


def _ready() -> None:
    """Nothing: a first process from the fork server, which has it import this module now."""


def _stop_once() -> None:
    """SIGINT and SIGTERM end a sender's process as they end a receiver; a second (a
    terminal's Ctrl-C reaches it and the station, which passes it on) does not cut short
    the abort the first began."""
    def stop(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Interrupted(130, "SIGINT") if signum == signal.SIGINT else Interrupted(143, "SIGTERM")

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


@dataclass
class Sender:
    """A sender being served, by its process."""

    key: int
    source: Address
    uid: int
    process: multiprocessing.process.BaseProcess
    channel: Connection
    came_since: list[bytes] | None = field(default_factory=list)
    """What the sender sent the listener after its OPEN, until its process's socket took
    over (an ABORT, a repeated OPEN): handed to the process then (None after)."""
    done: bool = False


class Station:
    """Serves up to ``most`` senders at once until a signal (see the module's docstring)."""

    def __init__(self, listen: Address, output: Output, options: Options, feedback: Feedback, *,
                 most: int = MOST_SENDERS, force: bool = False, gate: Gate | None = None,
                 metrics: Metrics | None = None) -> None:
        self.listen, self.output, self.options, self.feedback = listen, output, options, feedback
        self.metrics = metrics
        """Where the figures go for ``--metrics``: the senders' processes' and the station's."""
        self.most, self.force = most, force
        self.gate = gate or Gate(secret=options.secret)
        self.senders: dict[Address, Sender] = {}
        self.finished: deque[tuple[Address, int]] = deque(maxlen=RECENT_UIDS)
        self.reports: list[TransferReport] = []
        self.dropped: Counter[str] = Counter()
        """Datagrams the listener took and dropped, by reason (any connection's are its process's)."""
        self.refused: Counter[str] = Counter()
        """OPENs the listener refused, by :func:`refusal_kind`."""
        self.started = 0
        self._buf = bytearray(1 << 16)
        self._published = -math.inf
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload([__name__, CLI])

    def serve(self, listening: Callable[[str], None] | None = None) -> tuple[list[TransferReport], Interrupted]:
        """Serve until a signal, which is returned once every sender's process has ended."""
        self._listener = transport = Transport("udp", self.listen, share="open")
        try:
            self._codec = ControlCodec(transport.local_port)
            self._context.Process(target=_ready).start()  # the fork server warms up before any sender comes
            host = transport.sock.getsockname()[0]
            self._port = (host, transport.local_port)
            if listening:
                listening(show(self._port))
            try:
                while True:
                    self._look()
            except (KeyboardInterrupt, Interrupted) as exc:
                stop = exc if isinstance(exc, Interrupted) else Interrupted(130, "SIGINT")
                self._end_all(stop)
                return self.reports, stop
        finally:
            transport.close()
            for sender in self.senders.values():  # a second signal cut the ending short
                sender.process.kill()

    # -- the listener -------------------------------------------------------------------------

    def _look(self) -> None:
        channels = {sender.channel: sender for sender in self.senders.values()}
        for ready in wait([self._listener.sock, *channels], LOOK):
            if ready is self._listener.sock:
                self._take()
            else:
                self._hear(channels[ready])  # type: ignore[index]
        now = time.monotonic()
        if self.metrics and now - self._published >= PUBLISH_INTERVAL:
            self._published = now
            self.metrics.publish_station(len(self.senders), self.most, self.refused, self.dropped)

    def _take_waiting(self) -> None:
        """What the listener's socket holds now (a flood of it no longer than READ_AT_MOST reads)."""
        for _ in range(READ_AT_MOST):
            if not wait([self._listener.sock], 0):
                return
            self._take()

    def _take(self) -> None:
        try:
            view, segment, source = self._listener.receive(self._buf)
        except OSError:  # an ICMP error came back, as for a REFUSED sent to a port closed since
            for _, what in self._listener.errors():
                self.dropped[f"ICMP {what}"] += 1
            return
        if source is None:
            return
        segment = segment or len(view)
        for at in range(0, len(view), segment):
            self._arrived(view[at:at + segment], source)

    def _arrived(self, datagram: bytes | memoryview, source: Address) -> None:
        starting = self.senders.get(source)  # an OPEN may start one mid-batch
        if starting is not None and starting.came_since is not None and not is_data(datagram):
            if len(starting.came_since) < HELD_MOST:
                starting.came_since.append(bytes(datagram))
            else:
                self.dropped["more than a starting process is held"] += 1
            return
        if is_data(datagram):
            self.dropped["data from no sender being served"] += 1
            return
        packet = self._codec.decode(datagram, source, self.dropped)
        if isinstance(packet, Open):
            self._opened(packet, bytes(datagram), source)
        elif packet is not None:
            self.dropped["not an OPEN"] += 1  # a finished connection's late packets, or a stranger's

    def _opened(self, packet: Open, datagram: bytes, source: Address) -> None:
        if source in self.senders:
            self.dropped["late for its sender's process"] += 1  # queued here before that process took over
            return
        if (source, packet.uid) in self.finished:
            why: str | None = "that connection is over"
        elif why := self.gate.refusal(source, packet.uid, packet.client_string):
            pass  # who, before whether there is room
        elif len(self.senders) >= self.most:
            why = (f"busy: serving {self.most} sender{'s' if self.most > 1 else ''} at once, its limit "
                   "(--max-senders); try again when one ends")
        if why is not None:
            self._listener.send([self._codec.encode(Refused(why), source)], source)
            self.feedback.status(f"refused {show(source)}: {why}")
            self.refused[refusal_kind(why)] += 1
            return
        self.started += 1
        task = Assignment(datagram, source, self._port, self._listener.family, replace(self.options, metrics=None),
                          self.output, replace(self.gate, judged=True), self.force, self.feedback.tick,
                          self.metrics is not None)
        theirs, ours = self._context.Pipe()
        process = self._context.Process(target=serve_sender, args=(task, ours), daemon=True,
                                        name=f"netblt-recv {show(source)}")
        process.start()
        ours.close()
        self.senders[source] = Sender(self.started, source, packet.uid, process, theirs)

    # -- the senders' processes ---------------------------------------------------------------

    def _hear(self, sender: Sender) -> None:
        """What a sender's process said; its end when it has ended. A signal waits until
        what was taken from the channel is handled: raised between the two, it lost a
        report (a transfer that ended as the station was stopped went unreported)."""
        with stops_deferred():
            try:
                while sender.channel.poll():
                    self._heard(sender, sender.channel.recv())
            except (EOFError, OSError):
                self._ended(sender)

    def _heard(self, sender: Sender, message: tuple) -> None:
        what, *rest = message
        metrics = self.metrics
        if what == "status":
            self.feedback.status(rest[0])
        elif what == "progress":
            self.feedback.progress(rest[0], rest[1], task=f"from {show(sender.source)}")
        elif what == "report":
            self.reports.append(rest[0])
            self.feedback.report(rest[0])
        elif what == "publish" and metrics:
            metrics.publish(sender.key, rest[0])
        elif what == "ended" and metrics:
            metrics.ended(sender.key, rest[0])
        elif what == "ready":
            self._take_waiting()  # what its sender sent before its socket was connected may wait there
            sender.channel.send(sender.came_since)
            sender.came_since = None
            for datagram, source in rest[0]:  # other senders', which reached its socket before it was theirs
                self._arrived(datagram, source)
        elif what == "done":
            sender.done = True

    def _ended(self, sender: Sender) -> None:
        sender.process.join(1)
        del self.senders[sender.source]
        self.finished.append((sender.source, sender.uid))
        sender.channel.close()
        if not sender.done:
            code = sender.process.exitcode
            report = TransferReport(False, f"the process receiving from {show(sender.source)} ended "
                                    f"unexpectedly (exit status {code})", "receiver", peer=show(sender.source))
            if self.metrics:
                self.metrics.ended(sender.key, report)
            self.reports.append(report)
            self.feedback.report(report)

    def _end_all(self, stop: Interrupted) -> None:
        """Pass the signal on; wait up to GRACE for each process to tell its sender and
        report, and up to PLACING more for one that is still putting a received file in
        place (its sender was told all is well): a second signal ends them at once."""
        for sender in self.senders.values():
            if sender.process.pid is not None:
                try:
                    os.kill(sender.process.pid, signal.SIGINT if stop.code == 130 else signal.SIGTERM)
                except ProcessLookupError:
                    pass
        self._hear_until(time.monotonic() + GRACE)
        if self.senders:
            whom = ("a sender's process to put the file it received in place; a second signal ends it now"
                    if len(self.senders) == 1 else f"{len(self.senders)} senders' processes to put the files "
                    "they received in place; a second signal ends them now")
            self.feedback.status(f"waiting up to {PLACING:g} s for {whom}")
            self._hear_until(time.monotonic() + PLACING)

    def _hear_until(self, until: float) -> None:
        while self.senders and (left := until - time.monotonic()) > 0:
            channels = {sender.channel: sender for sender in self.senders.values()}
            for ready in wait(list(channels), left):
                self._hear(channels[ready])  # type: ignore[index]
