"""``make demo-board``: a file through a simulated board and back, over a lossy WAN.

The processes a user would run in five terminals, on loopback: ``netblt sim-board``
(the board's whole design under Verilator), ``netblt netem`` (1% loss, 3 ms each
way), and ``netblt send --board`` to a software ``netblt recv``; then a software
``netblt send`` to ``netblt recv --board``. Both copies are checked by SHA-256 and
both reports printed. The simulated board runs a few hundred times slower than a real
one (its cycles in C++: sim/rtl/harness.cpp), so 4 MiB each way take some 25 s; on a
board the same commands run at line rate.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
SIZE = 4 << 20
RECV_PORT, RELAY_PORT = 29991, 29992
WAN = ["--delay", "3ms", "--loss", "1%", "--duration", "900s"]


def started(args: list[str], expect: str) -> subprocess.Popen:
    """``netblt ARGS``, once it prints a line (recv: on stderr) containing ``expect``; the
    lines before it (a receiving board's notice) are shown."""
    proc = subprocess.Popen(NETBLT + args, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    said = proc.stderr if args[0] == "recv" else proc.stdout
    while expect not in (line := said.readline()):
        if not line or "error" in line:
            proc.kill()
            out, err = proc.communicate()
            raise SystemExit(f"netblt demo-board: netblt {args[0]} did not start: {line}{out}{err}".rstrip())
        print(line, end="", flush=True)
    return proc


def start_board(args: list[str], demo: str) -> tuple[subprocess.Popen, str, str, list[str]]:
    """``netblt sim-board ARGS`` once it has printed its two ports: the process, its
    host-link and NETBLT ports, and the two lines."""
    board = subprocess.Popen(NETBLT + ["sim-board", *args], text=True, stdout=subprocess.PIPE)
    lines = [board.stdout.readline() for _ in range(2)]  # "management ADDR:PORT", "netblt ADDR:PORT ..."
    if not (lines[0].startswith("management ") and lines[1].startswith("netblt ")):
        board.kill()
        raise SystemExit(f"netblt {demo}: netblt sim-board did not start (its error is above)")
    link, port = (line.split()[1].rsplit(":", 1)[1] for line in lines)
    return board, link, port, lines


def stop(running: list[subprocess.Popen]) -> None:
    """End what a demo started, the last first."""
    for proc in reversed(running):
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)


def digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def main() -> int:
    running: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="netblt-demo-board-") as tmp:
        source = Path(tmp) / "demo.bin"
        source.write_bytes(os.urandom(SIZE))
        there, back = Path(tmp) / "there", Path(tmp) / "back"
        there.mkdir()
        back.mkdir()
        print("netblt demo-board: starting netblt sim-board (the first time, Verilator builds it: minutes)",
              flush=True)
        try:
            board, link, port, _ = start_board([], "demo-board")
            running.append(board)
            print(f"  host link 127.0.0.1:{link}, the board's NETBLT port 127.0.0.1:{port}", flush=True)

            print(f"\n1. {SIZE >> 20} MiB: netblt send --board -> sim-board -> netem (1% loss) -> netblt recv\n",
                  flush=True)
            recv = started(["recv", "--listen", f"127.0.0.1:{RECV_PORT}", "--out", str(there)],
                           "waiting for a sender")
            running.append(recv)
            running.append(started(["netem", "--listen", f"127.0.0.1:{RELAY_PORT}", "--forward",
                                    f"127.0.0.1:{RECV_PORT}", *WAN], "netblt netem"))
            first = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{RELAY_PORT}", "--board",
                                             f"127.0.0.1:{link}", "--local-port", port], timeout=900)
            out, err = recv.communicate(timeout=60)
            print(out + err, end="", flush=True)
            running[-1].terminate()
            if first.returncode or recv.returncode:
                print("netblt demo-board: the first transfer failed (above)")
                return 1

            print("\n2. back: netblt send -> netem (1% loss) -> sim-board -> netblt recv --board\n", flush=True)
            recv = started(["recv", "--board", f"127.0.0.1:{link}", "--listen", f":{port}", "--out", str(back)],
                           "waiting for a sender")
            running.append(recv)
            running.append(started(["netem", "--listen", f"127.0.0.1:{RELAY_PORT}", "--forward",
                                    f"127.0.0.1:{port}", *WAN], "netblt netem"))
            second = subprocess.run(NETBLT + ["send", str(there / source.name), f"127.0.0.1:{RELAY_PORT}"],
                                    timeout=900)
            out, err = recv.communicate(timeout=60)
            print(out + err, end="", flush=True)
        finally:
            stop(running)
        want = digest(source)
        same = [path.exists() and digest(path) == want for path in (there / source.name, back / source.name)]
        for name, ok in zip(("there (the board sent it)", "back (the board received it)"), same):
            print(f"{name}: {'identical' if ok else 'NOT identical'} to the original (sha256 {want[:16]}...)")
        return 0 if second.returncode == 0 and recv.returncode == 0 and all(same) else 1


if __name__ == "__main__":
    sys.exit(main())
