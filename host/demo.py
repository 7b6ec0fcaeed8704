"""``make demo``: a real transfer between two software endpoints through the WAN relay.

Three processes on loopback, exactly as a user would run them in three terminals:
``netblt recv``, ``netblt netem`` (10 ms each way, 1% loss) and ``netblt send`` of a
64 MiB file, with the sender's progress bar and both reports.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NETBLT = [sys.executable, "-m", "netblt.host.cli"]
SIZE = 64 << 20
RECV_PORT, RELAY_PORT = 29981, 29982


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="netblt-demo-") as tmp:
        source = Path(tmp) / "demo.bin"
        with open(source, "wb") as f:
            for _ in range(SIZE >> 20):
                f.write(os.urandom(1 << 20))
        out = Path(tmp) / "received"
        out.mkdir()
        print(f"netblt demo: {SIZE >> 20} MiB, sender -> relay (10 ms each way, 1% loss) -> receiver\n",
              flush=True)
        recv = subprocess.Popen(NETBLT + ["recv", "--listen", f"127.0.0.1:{RECV_PORT}", "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        recv.stderr.readline()  # "waiting for a sender ..."
        relay = subprocess.Popen(NETBLT + ["netem", "--listen", f"127.0.0.1:{RELAY_PORT}", "--forward",
                                           f"127.0.0.1:{RECV_PORT}", "--delay", "10ms", "--loss", "1%",
                                           "--duration", "300s"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        relay.stdout.readline()
        try:
            sender = subprocess.run(NETBLT + ["send", str(source), f"127.0.0.1:{RELAY_PORT}"], timeout=300)
            recv_out, recv_err = recv.communicate(timeout=60)
        finally:
            relay.terminate()
            relay.wait()
            if recv.poll() is None:
                recv.kill()
        print(recv_out + recv_err, end="")
        copy = out / source.name
        same = copy.exists() and hashlib.sha256(copy.read_bytes()).digest() == \
            hashlib.sha256(source.read_bytes()).digest()
        print(f"\nreceived file identical to the original: {'yes' if same else 'NO'}")
        return 0 if sender.returncode == 0 and recv.returncode == 0 and same else 1


if __name__ == "__main__":
    sys.exit(main())
