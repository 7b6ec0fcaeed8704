"""netblt netem --tun: the path model between two network namespaces, for any IP traffic.

Needs root (namespaces, TUN devices); skipped without it, as make test itself does not.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from netblt.sim.wan.netem import PathConfig
from netblt.sim.wan.tun_path import ADDRESSES, TunPath
from netblt.sim.wan.veth_path import RoutedPath

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/dev/net/tun") or not shutil.which("ip"),
                                reason="needs root, /dev/net/tun and iproute2")
NETBLT = [sys.executable, "-m", "netblt.host.cli"]


def namespaces() -> set[str]:
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


@pytest.fixture
def tun():
    with TunPath(PathConfig(delay=0.005, loss=0.01), name=f"nbt{os.getpid()}") as path:
        done = threading.Event()
        relay = threading.Thread(target=path.run, kwargs={"stop": done.is_set})
        relay.start()
        yield path
        done.set()
        relay.join()
    assert not set(path.names) & namespaces()  # gone with the relay


def test_netblt_and_tcp_cross_the_same_emulated_path(tun, tmp_path):
    data = os.urandom(1 << 20)
    (tmp_path / "f.bin").write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    recv = subprocess.Popen(tun.exec(1, *NETBLT, "recv", "--listen", f"{ADDRESSES[1]}:2998", "--out", f"{out}/"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    recv.stderr.readline()
    sent = subprocess.run(tun.exec(0, *NETBLT, "send", str(tmp_path / "f.bin"), ADDRESSES[1], "-q"),
                          capture_output=True, text=True, timeout=120)
    recv.communicate(timeout=60)
    assert sent.returncode == 0 and recv.returncode == 0, sent.stderr
    assert hashlib.sha256((out / "f.bin").read_bytes()).digest() == hashlib.sha256(data).digest()
    forward, backward = tun.paths
    assert forward.counts["lost"] > 0 and forward.counts["delivered"] >= len(data) // 1500
    echo = ("import socket\ns = socket.create_server(('10.77.0.2', 5002))\nprint('ready', flush=True)\n"
            "c, _ = s.accept()\nc.sendall(c.recv(100).upper())")
    server = subprocess.Popen(tun.exec(1, sys.executable, "-c", echo), stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline() == "ready\n"
    ask = "import socket\nc = socket.create_connection(('10.77.0.2', 5002))\nc.sendall(b'tcp')\nprint(c.recv(100))"
    answer = subprocess.run(tun.exec(0, sys.executable, "-c", ask), capture_output=True, text=True, timeout=60)
    server.wait(timeout=10)
    assert answer.stdout.strip() == "b'TCP'"


def test_netem_tun_says_where_to_run_programs_and_cleans_up():
    name = f"nbc{os.getpid()}"
    result = subprocess.run(NETBLT + ["netem", "--tun", name, "--delay", "1ms", "--duration", "1s"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"ip netns exec {name}-a" in result.stdout.splitlines()[0]
    assert not {f"{name}-a", f"{name}-b"} & namespaces()
    clash = subprocess.run(NETBLT + ["netem", "--tun", name, "--listen", "127.0.0.1:0"], capture_output=True,
                           text=True)
    assert clash.returncode == 2 and "--tun takes no --listen" in clash.stderr


def test_data_larger_than_the_paths_mtu_ends_the_transfer_saying_so(tmp_path):
    """A tunnel's MTU under the DATA packets' size: the OPEN and the GOs cross, no DATA
    ever would. The sender once sent into the kernel's EMSGSIZE for ever, silently."""
    (tmp_path / "f.bin").write_bytes(os.urandom(1 << 20))
    out = tmp_path / "out"
    out.mkdir()
    with TunPath(PathConfig(delay=0.002), name=f"nbm{os.getpid()}", mtu=1400) as path:
        done = threading.Event()
        relay = threading.Thread(target=path.run, kwargs={"stop": done.is_set})
        relay.start()
        try:
            recv = subprocess.Popen(path.exec(1, *NETBLT, "recv", "--listen", f"{ADDRESSES[1]}:2998", "--out",
                                              f"{out}/"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            recv.stderr.readline()
            sent = subprocess.run(path.exec(0, *NETBLT, "send", str(tmp_path / "f.bin"), ADDRESSES[1], "-q"),
                                  capture_output=True, text=True, timeout=60)
            _, received = recv.communicate(timeout=60)
        finally:
            done.set()
            relay.join()
    assert sent.returncode != 0 and "Traceback" not in sent.stderr
    assert "DATA packets of 1448 bytes do not fit the path" in sent.stderr and "--packet-size" in sent.stderr
    assert recv.returncode != 0 and "do not fit the path" in received  # the ABORT's reason


def test_a_path_whose_mtu_shrinks_mid_transfer_ends_it_naming_the_mtu_and_the_fix_resumes(tmp_path):
    """A router's link narrows mid-transfer (a tunnel or VPN coming up): it answers each
    DATA packet that no longer fits with ICMP "fragmentation needed", naming its MTU. The
    sender ends within seconds with the packet size that fits, never hangs; sent again
    with it, the transfer resumes and the file arrives whole."""
    data = os.urandom(32 << 20)
    (tmp_path / "f.bin").write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    with RoutedPath(name=f"nbr{os.getpid()}") as path:
        def receiver() -> subprocess.Popen:
            recv = subprocess.Popen(path.exec(2, *NETBLT, "recv", "--listen", f"{path.RECEIVER}:2998", "--out",
                                              f"{out}/"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert "waiting for a sender" in recv.stderr.readline()
            return recv

        recv = receiver()
        sender = subprocess.Popen(path.exec(0, *NETBLT, "send", str(tmp_path / "f.bin"), path.RECEIVER,
                                            "--rate", "100M"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        time.sleep(1)  # the transfer under way: 32 MiB at 100 Mb/s take some 3 s
        path.narrow(1400)
        _, said = sender.communicate(timeout=15)
        _, received = recv.communicate(timeout=30)
        assert sender.returncode == 1 and "Traceback" not in said
        assert "do not fit the path to 10.80.2.2:2998: its MTU is 1400; give a --packet-size of 1348 or less" in said
        assert "aborted by peer: DATA packets of 1448 bytes do not fit the path" in received
        recv = receiver()
        again = subprocess.run(path.exec(0, *NETBLT, "send", str(tmp_path / "f.bin"), path.RECEIVER,
                                         "--packet-size", "1348"), capture_output=True, text=True, timeout=120)
        recv.communicate(timeout=30)
    assert again.returncode == 0, again.stderr
    assert (out / "f.bin").read_bytes() == data


def test_a_sender_finds_the_speed_of_the_interface_toward_its_peer():
    """Inside a namespace: the veth pair reports 10 Gb/s, past a
    gigabit, so an automatic sender's cap is a gigabit line's (host/cli.py automatic_cap)."""
    from netblt.sim.wan.veth_path import ADDRESSES as VETH, VethPath
    look = ("from netblt.driver.transport import link_speed_bps as speed; "
            "import sys; print(speed(sys.argv[1]), speed('127.0.0.1'))")
    with VethPath(1500, name="netblt-speed") as path:  # its own: the Haystack study may run beside it
        found = subprocess.run(path.exec(0, sys.executable, "-c", look, VETH[1]), capture_output=True, text=True,
                               timeout=60)
    assert found.stdout.split() == ["10000000000.0", "None"], found.stderr
