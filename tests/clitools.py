"""Running the ``netblt`` command in tests: real processes on loopback only."""

from __future__ import annotations

import json
import os
import signal
import threading
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from netblt.host.announce import Announcement
from netblt.protocol.codec import encode
from netblt.protocol.packets import Open

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
STARTED: list[subprocess.Popen] = []
"""Processes the helpers started; tests/conftest.py ends any still running after each test."""


def default_signals() -> None:
    """In a child, before it runs: SIGINT and SIGQUIT as a terminal would deliver them. A
    test run started in the background by a shell without job control (``make test &``)
    has them ignored, and every process it starts inherits that: the tests that interrupt
    a transfer failed there, and only there."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def spawn(args: list[str], **popen) -> subprocess.Popen:
    """``netblt ARGS`` in the background, ended after the test whatever happens."""
    proc = subprocess.Popen(NETBLT + args, preexec_fn=default_signals, **popen)
    STARTED.append(proc)
    return proc


def until(condition: Callable[[], object], what: str, within: float = 60) -> None:
    """Wait for ``condition()`` to hold: a test that signals a process after a fixed sleep
    signals too early on a slow or busy machine, where starting one takes seconds."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {within:g} s"
        time.sleep(0.02)


def handles(proc: subprocess.Popen, sig: signal.Signals) -> bool:
    """Whether ``proc`` catches ``sig`` (SigCgt in /proc): the program has reached the point
    where it answers the signal as it says it does."""
    with open(f"/proc/{proc.pid}/status") as status:
        caught = next(int(line.split()[1], 16) for line in status if line.startswith("SigCgt:"))
    return bool(caught >> (sig - 1) & 1)


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


PLACING_SLOWLY = """
import os
if os.environ.get("NETBLT_TEST_PLACING"):
    import time
    from pathlib import Path
    from netblt.host import files
    put = files.FileSink.commit
    def slow_commit(sink):
        Path(os.environ["NETBLT_TEST_PLACING"]).touch()
        time.sleep(float(os.environ["NETBLT_TEST_PLACING_SECONDS"]))
        return put(sink)
    files.FileSink.commit = slow_commit
"""


def placing_slowly(folder: Path, seconds: float) -> tuple[dict[str, str], Path]:
    """An environment in which every netblt process (a station's fork server's children
    too: the hook is a sitecustomize) takes ``seconds`` to put a received file in place,
    as a large file's sync does, and the path it touches as it begins."""
    hook, placing = folder / "hook", folder / "placing"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(PLACING_SLOWLY)
    return os.environ | {"PYTHONPATH": str(hook), "NETBLT_TEST_PLACING": str(placing),
                         "NETBLT_TEST_PLACING_SECONDS": str(seconds)}, placing


def send(*args: str, timeout: float = 120, **run) -> subprocess.CompletedProcess:
    return subprocess.run(NETBLT + ["send", *args], capture_output=True, text=True, timeout=timeout, **run)


def reports(stdout: str) -> list[dict]:
    """The JSON lines of ``--json``, one per file."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[list[dict], str]:
    stdout, stderr = proc.communicate(timeout=timeout)
    return reports(stdout), stderr


class SimBoard:
    """``netblt sim-board ARGS``, once it has printed its two ports: the board's design under
    Verilator, or with ``--model`` its functional model."""

    host = "127.0.0.1"
    """Where the board's software peers are, and where it is reached."""

    def __init__(self, *args: str, within: tuple[str, ...] = (), link_host: str = "127.0.0.1") -> None:
        """``within`` runs it inside something, e.g. ``ip netns exec NAME``; ``link_host`` is
        where its host link listens (``--link-address``)."""
        self.link_host = link_host
        self.proc = subprocess.Popen([*within, *NETBLT, "sim-board", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
        watchdog = threading.Timer(900, self.proc.kill)  # a first build takes minutes, never this long
        watchdog.start()
        try:
            self.link = self._port(f"management {link_host}:")
            self.netblt = self._port("netblt 127.0.0.1:")
        finally:
            watchdog.cancel()

    def _port(self, prefix: str) -> int:
        line = self.proc.stdout.readline()
        assert line.startswith(prefix), line + self.proc.stderr.read()
        return int(line[len(prefix):].split()[0])

    def line_with(self, text: str, timeout: float) -> str:
        """The next line it prints that holds ``text`` (those before are read and passed
        over), within ``timeout`` seconds."""
        found: list[str] = []

        def read() -> None:
            for line in self.proc.stdout:
                if text in line:
                    found.append(line)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        assert found, f"sim-board printed no line with {text!r} in {timeout:g} s"
        return found[0]

    @property
    def link_address(self) -> str:
        return f"{self.link_host}:{self.link}"

    @property
    def netblt_address(self) -> str:
        return f"{self.host}:{self.netblt}"

    def status(self) -> dict[str, int]:
        done = subprocess.run(NETBLT + ["board", "status", self.link_address, "--json"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["board"] == self.link_address
        return answer["registers"]

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        stdout, _ = self.proc.communicate(timeout=120)
        return self.proc.returncode, stdout

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class RealBoard(SimBoard):
    """A board on a cable: NETBLT_TEST_BOARD=ADDR[:LINK_PORT] names it, and
    NETBLT_TEST_HOST the address of this host that it reaches (its software peers listen
    there). Its NETBLT port is 2998, the host's default."""

    def __init__(self, board: str, host: str) -> None:
        address, _, port = board.partition(":")
        self.link_host, self.host = address, host
        self.link, self.netblt = int(port or 2990), 2998

    @property
    def netblt_address(self) -> str:
        return f"{self.link_host}:{self.netblt}"

    def close(self) -> None:
        pass


def opening(uid: int, name: str) -> Open:
    """The OPEN of a 5-byte file ``name``, as a test sends one by hand."""
    return Open(uid=uid, buffer_size=14480, packet_size=1448, burst_size=5, burst_interval=10, death_timer=30,
                max_buffers=2, data_checksum=False, write_mode=True, transfer_size=5,
                client_string=Announcement(name, 5, "00" * 32).encode())


def send_open(sock: socket.socket, port: int, uid: int, name: str) -> None:
    """:func:`opening` from ``sock`` (bound) to a receiver on 127.0.0.1 ``port``."""
    sock.sendto(encode(opening(uid, name), sock.getsockname()[1], port), ("127.0.0.1", port))
