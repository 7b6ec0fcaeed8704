"""Prometheus metrics for a station's dashboard (`--metrics ADDR:PORT` on `recv`, `send` and
`board watch`).

prometheus_client serves them in Prometheus' text format. The run loop publishes each
transfer's figures at its progress ticks, as the report it ends with (host/transfer.py
``_report``), and `board watch` each board's decoded snapshot; a scrape reads the latest,
so the HTTP server's thread never touches a transfer's live state. A transfer that ends
leaves the per-transfer gauges and adds to the process's totals.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..formats.registers import DROP_COUNTERS, REGISTERS

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from ..driver.transport import Address
    from .transfer import TransferReport

PER_TRANSFER = (
    ("bytes", "Bytes the connection has moved (resumed bytes not included).", "bytes", 1),
    ("rate_bytes_per_second", "The connection's rate from its set-up to now.", "real_mbps", 1e6 / 8),
    ("steady_rate_bytes_per_second", "The rate between its first buffer and the start of its last (RFC 1030).",
     "steady_state_mbps", 1e6 / 8),
    ("packets_resent", "DATA packets sent again (sender) or asked for again (receiver).", "packets_retransmitted", 1),
    ("packets_lost", "DATA packets the receiver found missing.", "packets_lost", 1),
    ("data_timeouts", "Times the receiver's data timer ran out waiting for a buffer's packets.", "data_timeouts", 1),
    ("buffers_outstanding", "Buffers the connection may have in flight.", "outstanding_buffers", 1),
    ("round_trip_seconds", "The receiver's smoothed round trip of its control messages (0 at a sender).",
     "round_trip_ms", 1e-3),
    ("seconds", "Time since the connection was set up.", "seconds", 1),
    ("cpu_seconds", "This process's CPU time since the connection was set up.", "cpu_seconds", 1),
)
"""Gauges for each transfer in progress: (name after netblt_transfer_, help, report field, scale)."""
REGISTER_DOCS = {r.name: r.doc for r in REGISTERS}
LABELS = ("role", "peer", "file", "data_path")


class Metrics(Collector):
    """What the transfers of this process have done: the ones running, by their labels,
    and the totals of those that ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, TransferReport] = {}
        self._ended: Counter[tuple[str, str]] = Counter()
        self._bytes: Counter[str] = Counter()
        self._dropped: Counter[str] = Counter()
        self._boards: dict[str, dict] = {}
        self._station: tuple[int, int, Counter[str], Counter[str]] | None = None

    def publish(self, key: int, report: TransferReport) -> None:
        """The transfer ``key``'s figures now."""
        with self._lock:
            self._running[key] = report

    def ended(self, key: int, report: TransferReport) -> None:
        """The transfer ``key`` ended with ``report`` (one never set up counts nowhere)."""
        with self._lock:
            self._running.pop(key, None)
            if not report.established:
                return
            self._ended[report.role, "ok" if report.ok else "failed"] += 1
            self._bytes[report.role] += report.bytes
            self._dropped.update(report.dropped)

    def publish_station(self, serving: int, most: int, refused: Counter[str], dropped: Counter[str]) -> None:
        """A station's (host/station.py): senders served now and at most, OPENs it refused
        and datagrams its listener dropped, by reason (copies)."""
        with self._lock:
            self._station = serving, most, Counter(refused), Counter(dropped)

    def publish_board(self, board: dict) -> None:
        """A board's snapshot, decoded (host/board_status.py ``decoded``)."""
        with self._lock:
            self._boards[board["board"]] = board

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            running = list(self._running.values())
            ended, moved, dropped = Counter(self._ended), Counter(self._bytes), Counter(self._dropped)
            boards = list(self._boards.values())
            station = self._station
        if station:
            dropped.update(station[3])
        yield from _transfers(running, ended, moved, dropped)
        yield from _station(station)
        yield from _boards(boards)

    def serve(self, address: Address) -> Server:
        """Serve the metrics at ``address`` until the returned server is shut down."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        server, _ = start_http_server(address[1], addr=address[0] or "0.0.0.0", registry=registry)
        return Server(server)


class Server:
    """The metrics' HTTP server, with a shutdown that frees its port."""

    def __init__(self, server) -> None:  # wsgiref's WSGIServer
        self._server = server

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _labels(report: TransferReport) -> list[str]:
    return [report.role, report.peer, report.name, report.data_path]


def _transfers(running: list[TransferReport], ended: Counter[tuple[str, str]], moved: Counter[str],
               dropped: Counter[str]) -> Iterator[Metric]:
    """Each running transfer's gauges, and the totals: ``moved`` and ``dropped`` are the
    ended transfers' (copies), to which the running ones' are added."""
    for name, text, field, scale in PER_TRANSFER:
        gauge = GaugeMetricFamily(f"netblt_transfer_{name}", text, labels=LABELS)
        for report in running:
            gauge.add_metric(_labels(report), getattr(report, field) * scale)
        yield gauge
    dropping = GaugeMetricFamily("netblt_transfer_dropped_packets", "Bad packets a transfer counted and "
                                 "dropped so far, by reason.", labels=(*LABELS, "reason"))
    for report in running:
        for reason, count in report.dropped.items():
            dropping.add_metric([*_labels(report), reason], count)
            dropped[reason] += count
    yield dropping
    yield GaugeMetricFamily("netblt_transfers_running", "Transfers in progress.", value=len(running))
    finished = CounterMetricFamily("netblt_transfers", "Transfers that ended, by role and outcome.",
                                   labels=("role", "outcome"))
    for (role, outcome), count in sorted(ended.items()):
        finished.add_metric([role, outcome], count)
    yield finished
    for report in running:
        moved[report.role] += report.bytes
    total = CounterMetricFamily("netblt_bytes", "Bytes moved by every transfer, by role.", labels=("role",))
    for role, count in sorted(moved.items()):
        total.add_metric([role], count)
    yield total
    drops = CounterMetricFamily("netblt_dropped_packets", "Bad packets counted and dropped, by reason.",
                                labels=("reason",))
    for reason, count in sorted(dropped.items()):
        drops.add_metric([reason], count)
    yield drops


def _station(station: tuple[int, int, Counter[str], Counter[str]] | None) -> Iterator[Metric]:
    """A station's senders and refusals (its listener's drops are in netblt_dropped_packets)."""
    if station is None:
        return
    serving, most, refused, _ = station
    yield GaugeMetricFamily("netblt_station_senders", "Senders the station serves now.", value=serving)
    yield GaugeMetricFamily("netblt_station_senders_limit", "Senders it serves at most at once (--max-senders).",
                            value=most)
    refusals = CounterMetricFamily("netblt_station_refused_opens", "OPENs the station's listener refused, "
                                   "by reason.", labels=("reason",))
    for reason, count in sorted(refused.items()):
        refusals.add_metric([reason], count)
    yield refusals


def _boards(boards: list[dict]) -> Iterator[Metric]:
    """Each board's counters (32 bits: a wrap shows as a counter reset), drops by reason,
    and its link, owner and engine."""
    if not boards:
        return
    info = GaugeMetricFamily("netblt_board_info", "A board: its name, address, MAC and owner (1).",
                             labels=("board", "name", "address", "mac", "owner"))
    up = GaugeMetricFamily("netblt_board_link_up", "Its Ethernet link is up (1) or down (0).", labels=("board",))
    owned = GaugeMetricFamily("netblt_board_owned", "A host holds its session (1) or none does (0).",
                              labels=("board",))
    silent = GaugeMetricFamily("netblt_board_owner_silent_seconds", "Its owner's silence, by the board's clock.",
                               labels=("board",))
    sending = GaugeMetricFamily("netblt_board_sending", "Its engine has packets to send (1) or is idle (0).",
                                labels=("board",))
    drops = CounterMetricFamily("netblt_board_dropped_packets", "Packets it dropped, by reason.",
                                labels=("board", "reason"))
    counters: dict[str, CounterMetricFamily] = {}
    for board in boards:
        where, owner = board["board"], board["link"]["owner"]
        held = owner is not None and not owner["left"]
        info.add_metric([where, board["name"], board["address"], board["mac"], owner["address"] if held else ""], 1)
        up.add_metric([where], int(board["link"]["up"]))
        owned.add_metric([where], int(held))
        silent.add_metric([where], owner["silent_seconds"] if held else 0)
        sending.add_metric([where], int(not board["engine"]["state"]["tx_idle"]))
        for name, value in board["counters"].items():
            if name in DROP_COUNTERS:
                drops.add_metric([where, DROP_COUNTERS[name].name.lower()], value)
                continue
            if name not in counters:
                counters[name] = CounterMetricFamily(f"netblt_board_{name.lower()}", REGISTER_DOCS.get(name, name),
                                                     labels=("board",))
            counters[name].add_metric([where], value)
    yield from (info, up, owned, silent, sending, drops, *counters.values())
