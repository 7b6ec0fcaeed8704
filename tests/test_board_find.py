"""``netblt board find`` on a segment of its own: two network namespaces this test
creates, joined by a veth pair, with two board models listening on one side (at their
default host-link port, as boards on a LAN do) and the host on the other. No packet
leaves the namespaces.

Needs root and iproute2; skipped without them, as make test itself does not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from clitools import NETBLT, SimBoard

from netblt.formats.host_link import LINK_PORT

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="needs root and iproute2")

SEGMENT = "10.79.0.0/24"
HOST = "10.79.0.1"
BOARDS = {"10.79.0.2": "colorlight_5a75b", "10.79.0.3": "versa_ecp5"}


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


@pytest.fixture
def segment():
    """The host's namespace and the boards' namespace, joined by a veth pair."""
    name = f"nbf{os.getpid()}"
    host, boards = f"{name}h", f"{name}b"
    try:
        for namespace in (host, boards):
            ip("netns", "add", namespace)
        ip("link", "add", host, "netns", host, "type", "veth", "peer", "name", boards, "netns", boards)
        ip("-n", host, "addr", "add", f"{HOST}/24", "dev", host)
        for address in BOARDS:
            ip("-n", boards, "addr", "add", f"{address}/24", "dev", boards)
        for namespace in (host, boards):
            ip("-n", namespace, "link", "set", namespace, "up")
            ip("-n", namespace, "link", "set", "lo", "up")
        yield ("ip", "netns", "exec", host), ("ip", "netns", "exec", boards)
    finally:
        for namespace in (host, boards):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)


def test_board_find_lists_each_board_on_a_segment_once(segment):
    """Two boards among the 254 addresses of a /24 (the rest no one answers for), found at
    the default port, each once, in address order, decoded; and the same as lines."""
    at_host, at_boards = segment
    boards = [SimBoard("--model", "--board", name, "--link-address", address, "--link-port", str(LINK_PORT),
                       within=at_boards, link_host=address) for address, name in BOARDS.items()]
    try:
        done = subprocess.run([*at_host, *NETBLT, "board", "find", SEGMENT, "--json"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        found = [json.loads(line) for line in done.stdout.splitlines()]
        assert [(board["board"], board["name"]) for board in found] == \
            [(f"{address}:{LINK_PORT}", name) for address, name in BOARDS.items()]
        assert all(board["link"]["owner"] is None for board in found)
        done = subprocess.run([*at_host, *NETBLT, "board", "find", SEGMENT], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert [line.split(",")[0] for line in done.stdout.splitlines()] == \
            [f"{address}:{LINK_PORT}: {name}" for address, name in BOARDS.items()]
    finally:
        for board in boards:
            board.close()


def test_board_find_says_when_no_board_answers_on_a_segment(segment):
    at_host, _ = segment
    done = subprocess.run([*at_host, *NETBLT, "board", "find", SEGMENT, "--timeout", "300ms"],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.strip() == f"netblt: no board answered on {SEGMENT} at port {LINK_PORT} within 0.3 s"
