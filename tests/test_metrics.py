"""`--metrics ADDR:PORT`: the transfers' figures as Prometheus takes them (host/metrics.py).

Everything listens and scrapes on loopback. prometheus_client's own parser reads the
text everywhere; where the system has Prometheus (make test installs it as it does
tshark), promtool checks it and a real server scrapes it.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from clitools import NETBLT, send_open, spawn, start_recv
from prometheus_client.parser import text_string_to_metric_families

from netblt.host.board_status import GROUPS, LINK_GROUPS, decoded
from netblt.host.metrics import Metrics
from netblt.host.transfer import TransferReport

SIZE = 3_000_001
DASHBOARD = Path(__file__).parent.parent / "docs" / "grafana" / "netblt-station.json"


def tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return answer.read().decode()


def value(text: str, name: str, **labels: str) -> float | None:
    """The one sample called ``name`` whose labels include ``labels``, or None."""
    found = [s.value for family in text_string_to_metric_families(text) for s in family.samples
             if s.name == name and labels.items() <= s.labels.items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


@pytest.fixture
def running(tmp_path):
    """A receiver that keeps serving and a sender at 4 Mb/s (some 6 s), each with its
    metrics served; yields (receiver's metrics port, sender's, the receiver, the sender)."""
    payload = tmp_path / "payload.bin"
    payload.write_bytes(bytes(range(256)) * (SIZE // 256) + b"x" * (SIZE % 256))
    recv_port, send_port = tcp_port(), tcp_port()
    (tmp_path / "in").mkdir()
    recv, port = start_recv(tmp_path, "--keep-serving", "--out", str(tmp_path / "in"),
                            "--metrics", f"127.0.0.1:{recv_port}")
    sender = spawn(["send", str(payload), f"127.0.0.1:{port}", "--rate", "4M", "--json",
                    "--metrics", f"127.0.0.1:{send_port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield recv_port, send_port, recv, sender
    recv.terminate()
    recv.communicate(timeout=30)


def test_a_transfer_shows_at_both_ends_and_adds_to_the_totals(running):
    recv_port, send_port, recv, sender = running
    deadline = time.monotonic() + 20
    while not value(scrape(recv_port), "netblt_transfer_bytes", role="receiver"):
        assert time.monotonic() < deadline, scrape(recv_port)
        time.sleep(0.2)
    during, sending = scrape(recv_port), scrape(send_port)
    assert value(during, "netblt_transfers_running") == 1
    assert 0 < value(during, "netblt_transfer_bytes", role="receiver", file="payload.bin") < SIZE
    assert value(during, "netblt_transfer_rate_bytes_per_second", role="receiver") > 0
    assert value(during, "netblt_transfer_buffers_outstanding", role="receiver") >= 1
    assert 0 < value(during, "netblt_transfer_round_trip_seconds", role="receiver") < 1  # loopback
    assert value(sending, "netblt_transfer_bytes", role="sender", file="payload.bin") is not None
    assert value(sending, "netblt_transfer_packets_resent", role="sender") == 0
    assert value(during, "netblt_station_senders") == 1 and value(during, "netblt_station_senders_limit") == 8
    stdout, stderr = sender.communicate(timeout=60)
    assert sender.returncode == 0, stderr
    assert json.loads(stdout.splitlines()[-1])["ok"]
    deadline = time.monotonic() + 10
    while not value(after := scrape(recv_port), "netblt_transfers_total", role="receiver", outcome="ok"):
        assert time.monotonic() < deadline, after
        time.sleep(0.2)
    assert value(after, "netblt_transfers_running") == 0
    assert value(after, "netblt_transfer_bytes", role="receiver") is None  # it ended: no gauge left
    assert value(after, "netblt_bytes_total", role="receiver") == SIZE


@pytest.mark.skipif(shutil.which("promtool") is None, reason="no promtool (the system's prometheus package)")
def test_promtool_accepts_the_metrics(running):
    recv_port, *_ = running
    deadline = time.monotonic() + 20
    while not value(text := scrape(recv_port), "netblt_transfer_bytes", role="receiver"):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="no Prometheus server (the system's package)")
def test_a_prometheus_server_scrapes_a_receiver(running, tmp_path):
    recv_port, *_ = running
    web = tcp_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s}\n"
        f"scrape_configs: [{{job_name: netblt, static_configs: [{{targets: ['127.0.0.1:{recv_port}']}}]}}]\n")
    server = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                               f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # The bytes counted once the transfer ends, not its running gauge: a server slow
        # to start (make test's other workers) may first scrape after the 6 s transfer.
        deadline, seen = time.monotonic() + 60, []
        while time.monotonic() < deadline and not (seen and float(seen[0]["value"][1]) == SIZE):
            time.sleep(1)
            try:
                seen = _query(web, 'netblt_bytes_total{role="receiver"}')
            except OSError:
                continue  # not listening yet
        assert seen and float(seen[0]["value"][1]) == SIZE, seen
        assert _query(web, "up")[0]["value"][1] == "1"
    finally:
        server.terminate()
        server.communicate(timeout=30)


def _query(web: int, expression: str) -> list:
    url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())["data"]["result"]


def test_a_station_counts_the_opens_it_refuses_and_what_its_listener_drops(tmp_path):
    port_metrics = tcp_port()
    (tmp_path / "in").mkdir()
    (tmp_path / "big.bin").write_bytes(bytes(SIZE))
    (tmp_path / "other.bin").write_bytes(b"other")
    recv, port = start_recv(tmp_path, "--keep-serving", "--max-senders", "1", "--out", str(tmp_path / "in"),
                            "--allow", "127.0.0.1/32", "--metrics", f"127.0.0.1:{port_metrics}")
    try:
        first = spawn(["send", str(tmp_path / "big.bin"), f"127.0.0.1:{port}", "--rate", "8M"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert "receiving big.bin" in recv.stderr.readline()
        refused = subprocess.run([*NETBLT, "send", str(tmp_path / "other.bin"), f"127.0.0.1:{port}"],
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 1
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:  # from an address not allowed
            stranger.bind(("127.0.0.2", 0))
            send_open(stranger, port, 3, "x")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stray:
            stray.sendto(b"\x00" * 3, ("127.0.0.1", port))  # too short for any NETBLT packet
        deadline = time.monotonic() + 10
        while not _dropped(text := scrape(port_metrics)):
            assert time.monotonic() < deadline, text
            time.sleep(0.2)
        assert value(text, "netblt_station_refused_opens_total", reason="busy") == 1
        assert value(text, "netblt_station_refused_opens_total", reason="not allowed") == 1  # no address as label
        first.communicate(timeout=60)
    finally:
        recv.terminate()
        recv.communicate(timeout=30)


def _dropped(text: str) -> float:
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "netblt_dropped_packets_total")


def test_a_metrics_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*NETBLT, "recv", "--listen", "127.0.0.1:0",
                               "--metrics", f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=30,
                              cwd=Path(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}: Address already in use" in done.stderr


def test_the_example_dashboard_asks_for_what_is_served(tmp_path):
    """docs/grafana/netblt-station.json: every metric its queries name is one the
    collector serves (a transfer running, one ended, a board and a station published), and promtool
    reads each query."""
    metrics = Metrics()
    metrics.publish(1, TransferReport(True, "", "receiver", established=True, dropped={"short": 1}))
    metrics.ended(2, TransferReport(True, "", "sender", established=True))
    metrics.publish_board(decoded("127.0.0.1:2990", {r.name: 0 for _, group in GROUPS + LINK_GROUPS for r in group}))
    metrics.publish_station(1, 8, Counter(busy=1), Counter())
    served = {sample.name for family in metrics.collect() for sample in family.samples}
    queries = [target["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for target in panel["targets"]]
    assert set(re.findall(r"\bnetblt_\w+", " ".join(queries))) <= served
    if shutil.which("promtool"):
        rules = tmp_path / "rules.yml"
        rules.write_text("groups:\n- name: dashboard\n  rules:\n" + "".join(
            f"  - record: netblt:query{i}\n    expr: {json.dumps(query)}\n" for i, query in enumerate(queries)))
        checked = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True)
        assert checked.returncode == 0, checked.stdout + checked.stderr
