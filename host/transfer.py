"""File transfers over the software data path, in real time: what the CLI runs.

``send_file`` is the active data sender (WRITE mode); ``receive_file`` the passive data
receiver. Both return a :class:`Report` with RFC 1030's columns.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from netblt.driver.software import SoftwareDataPath
from netblt.driver.transport import Kind, Transport

from .endpoint import Endpoint, Progress
from .engine import Connection
from .files import FileSink, FileSource, describe
from .params import Params, Timing

Tick = Callable[[Progress, int], None]
"""Called a few times a second with the progress and the total bytes (0 if not known yet)."""


class TransferError(Exception):
    """A transfer that failed; the message is one line for the user."""


@dataclass
class Report:
    ok: bool
    reason: str
    role: str
    bytes: int
    sha256: str
    burst_size: int = 0
    burst_interval_ms: int = 0
    packet_size: int = 0
    buffer_size: int = 0
    outstanding_buffers: int = 0
    packets_lost: int = 0
    packets_retransmitted: int = 0
    data_timeouts: int = 0
    steady_state_mbps: float = 0.0
    real_mbps: float = 0.0
    seconds: float = 0.0
    """Wall time from connection set-up (receiver) or program start (sender) to the end."""
    cpu_seconds: float = 0.0
    """CPU this process used over ``seconds``, all threads."""
    datapath_cpu_seconds: float = 0.0
    """Of which the data path's receive and transmit threads (per-packet work)."""
    path: str = ""
    dropped: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict:
        return asdict(self)


def run(endpoint: Endpoint, dp: SoftwareDataPath, total: Callable[[], int], tick: Tick | None) -> None:
    """Drive one endpoint until its connection finishes; Ctrl-C aborts it."""
    conn = endpoint.conn
    endpoint.start(time.monotonic())
    last_tick = 0.0
    try:
        while not endpoint.finished:
            now = time.monotonic()
            deadline = conn.deadline
            wait = 0.1 if deadline is None else min(0.1, max(0.0, deadline - now))
            for event in dp.wait_events(wait):
                endpoint.handle(event, time.monotonic())
            now = time.monotonic()
            if conn.deadline is not None and now >= conn.deadline:
                for event in dp.flush():
                    endpoint.handle(event, now)
                endpoint.timeout(now)
            if tick and now - last_tick > 0.1:
                last_tick = now
                tick(endpoint.progress, total())
    except KeyboardInterrupt:
        endpoint.run(conn.abort("interrupted by the user", time.monotonic()), time.monotonic())
    finally:
        dp.close()
        if tick:
            tick(endpoint.progress, total())


def _report(endpoint: Endpoint, dp: SoftwareDataPath, role: str, started: float, sha256: str,
            path: str) -> Report:
    progress, conn = endpoint.progress, endpoint.conn
    result = progress.result
    p = progress.params
    report = Report(ok=bool(result and result.ok), reason=result.reason if result else "not finished",
                    role=role, bytes=progress.bytes_done,
                    sha256=sha256, path=path, seconds=round(time.monotonic() - started, 3),
                    cpu_seconds=round(time.process_time() - endpoint.cpu_start, 3),
                    datapath_cpu_seconds=round(sum(dp.thread_cpu.values()), 3),
                    dropped=dp.drop_counts())
    if p is not None:
        report.burst_size, report.burst_interval_ms = p.burst_size, p.burst_interval
        report.packet_size, report.buffer_size = p.packet_size, p.buffer_size
        report.outstanding_buffers = p.max_buffers
    role_state = conn.role
    if role == "receiver" and role_state is not None:
        report.packets_lost = len(role_state.lost)
        report.packets_retransmitted = role_state.requested
        report.data_timeouts = role_state.data_timeouts
    elif dp.tx is not None:
        report.packets_retransmitted = dp.tx.resent
    report.steady_state_mbps = round(progress.steady_state_bps() / 1e6, 3)
    report.real_mbps = round(8 * progress.bytes_done / (time.monotonic() - started) / 1e6, 3) \
        if progress.done_at else 0.0
    return report


def send_file(path: str | os.PathLike, peer: tuple[str, int], params: Params, *, kind: Kind = "udp",
              timing: Timing = Timing(), tick: Tick | None = None) -> Report:
    started = time.monotonic()
    try:
        source = FileSource(path)
    except OSError as exc:
        raise TransferError(f"cannot read {path}: {exc.strerror}") from None
    try:
        sha256 = source.sha256()
        transport = Transport(kind, ("0.0.0.0", 0 if kind == "udp" else 0x8000 | os.getpid() & 0x7FFF), peer)
        dp = SoftwareDataPath(transport, foreign_port=peer[1])
        conn = Connection(active=True, sender=True, params=params, timing=timing,
                          transfer_size=source.size,
                          client_string=describe(source.size, sha256, Path(path).name))
        endpoint = Endpoint(conn, dp, source=source)
        run(endpoint, dp, lambda: source.size, tick)
        return _report(endpoint, dp, "sender", started, sha256, str(path))
    finally:
        source.close()


def receive_file(listen: tuple[str, int], out: str | os.PathLike | None, params: Params, *,
                 kind: Kind = "udp", timing: Timing = Timing(), tick: Tick | None = None,
                 listening: Callable[[str], None] | None = None) -> Report:
    """Wait for one transfer and write it to ``out`` (see :class:`FileSink`)."""
    transport = Transport(kind, listen, None)
    if listening:
        listening(f"{listen[0]}:{transport.local_port}")
    dp = SoftwareDataPath(transport)
    conn = Connection(active=False, sender=False, params=params, timing=timing,
                      client_string=b"netblt-recv")
    sink = FileSink(out)
    endpoint = Endpoint(conn, dp, sink=sink)
    try:
        run(endpoint, dp, lambda: int(sink.expected.get("size", 0) or 0), tick)
        started = endpoint.progress.established_at or time.monotonic()
        report = _report(endpoint, dp, "receiver", started, sink.hash.hexdigest(), str(sink.target or ""))
        if report.ok and (problem := sink.verify()):
            report.ok, report.reason = False, problem
        if report.ok:
            report.path = str(sink.commit())
        return report
    finally:
        sink.discard()
