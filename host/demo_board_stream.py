"""``make demo-board-stream``: data born on a board, sent across a long lossy path.

The commands a user would run in three terminals, on loopback: ``netblt sim-board
--model`` (the board's functional model with the Versa's DRAM geometry, and a WAN of
50 ms round trip and 0.5% loss each way between its NETBLT port and its peers),
``netblt recv`` (software, writing the file), and ``netblt send --board --source
pattern``: the board's pattern source fills each slot, so the host drives control
messages only. The receiver checks every byte as it comes; ``netblt check`` checks the
file once more at the end. No HDL tools are needed; ``netblt sim-board`` without
``--model`` runs the same commands on the board's design under Verilator, slowly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .demo_board import NETBLT, start_board, started, stop

SIZE = "256M"
RATE = "300M"
"""What the model, a Python process, keeps up with beside the receiver on 2 cores."""
RECV_PORT = 29993
BOARD = ["--model", "--board", "versa_ecp5", "--slots", "dram", "--mtu", "9000", "--wan-delay", "25ms",
         "--wan-loss", "0.005"]


def main() -> int:
    running: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix="netblt-demo-board-stream-") as tmp:
        print(f"$ netblt sim-board {' '.join(BOARD)}", flush=True)
        try:
            board, link, port, lines = start_board(BOARD, "demo-board-stream")
            running.append(board)
            print(*lines, board.stdout.readline(), sep="  ", end="", flush=True)

            print(f"\n$ netblt recv --listen 127.0.0.1:{RECV_PORT} --out {tmp}", flush=True)
            recv = started(["recv", "--listen", f"127.0.0.1:{RECV_PORT}", "--out", tmp], "waiting for a sender")
            running.append(recv)
            send = ["send", "--board", f"127.0.0.1:{link}", "--local-port", port, "--link-mtu", "9000",
                    "--buffer-size", "4M", "--rate", RATE, "--source", "pattern", "--size", SIZE,
                    f"127.0.0.1:{RECV_PORT}"]
            print(f"$ netblt {' '.join(send)}\n", flush=True)
            sent = subprocess.run(NETBLT + [*send, "--json"], text=True, stdout=subprocess.PIPE, timeout=900)
            out, err = recv.communicate(timeout=120)
            print(out + err, end="", flush=True)
        finally:
            stop(running)
        if sent.returncode or recv.returncode:
            print("netblt demo-board-stream: the transfer failed (above)")
            return 1
        host = json.loads(sent.stdout)
        print(f"\nthe board's host: {host['cpu_seconds']:.2f} s of CPU for {host['bytes'] >> 20} MiB, "
              f"{host['host_link_bytes'] / 1000:.0f} KB over the host link "
              f"({host['host_link_bytes'] / host['bytes']:.2%} of the data), "
              f"{host['packets_retransmitted']} packets sent again from the board's slots")
        print(f"\n$ netblt check {Path(tmp) / 'pattern'}", flush=True)
        return subprocess.run(NETBLT + ["check", str(Path(tmp) / "pattern")]).returncode


if __name__ == "__main__":
    sys.exit(main())
