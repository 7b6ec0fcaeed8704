"""Running the ``netblt`` command in tests: real processes on loopback only."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
STARTED: list[subprocess.Popen] = []
"""Processes the helpers started; tests/conftest.py ends any still running after each test."""


def spawn(args: list[str], **popen) -> subprocess.Popen:
    """``netblt ARGS`` in the background, ended after the test whatever happens."""
    proc = subprocess.Popen(NETBLT + args, **popen)
    STARTED.append(proc)
    return proc


def free_port(family: int = socket.AF_INET) -> int:
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.bind(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0))
        return s.getsockname()[1]


def start_recv(cwd: Path, *args: str, port: int | None = None, host: str = "127.0.0.1",
               **popen) -> tuple[subprocess.Popen, int]:
    """``netblt recv --json`` listening on loopback, once it says it is waiting."""
    port = port or free_port()
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    proc = spawn(["recv", "--listen", where, "--json", *args], stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True, cwd=cwd, **popen)
    line = proc.stderr.readline()
    assert "waiting for a sender" in line, line + proc.stderr.read()
    return proc, port


def send(*args: str, timeout: float = 120, **run) -> subprocess.CompletedProcess:
    return subprocess.run(NETBLT + ["send", *args], capture_output=True, text=True, timeout=timeout, **run)


def reports(stdout: str) -> list[dict]:
    """The JSON lines of ``--json``, one per file."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[list[dict], str]:
    stdout, stderr = proc.communicate(timeout=timeout)
    return reports(stdout), stderr
