"""The path model between two network namespaces, for any IP traffic (needs root).

``netblt netem --tun`` creates namespaces ``<name>-a`` and ``<name>-b``, each with a TUN
device: ``a`` is 10.77.0.1 and ``b`` is 10.77.0.2, each the other's only route. This
process reads every IP packet one side's kernel sends, applies :class:`Path` (the
forward path from a to b, the backward path from b to a) and writes it into the other
side's kernel. So TCP, NETBLT over UDP and NETBLT over IP protocol 30 all cross the same
emulated WAN (the kernel here has no netem qdisc). Run programs on either side with
``ip netns exec <name>-a ...``. The namespaces go when the relay ends.
"""

from __future__ import annotations

import fcntl
import os
import selectors
import struct
import subprocess
import time

from .netem import InFlight, Path, PathConfig, precise_selector

ADDRESSES = ("10.77.0.1", "10.77.0.2")
"""Side a's and side b's address; they exist only inside the two namespaces."""
TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
MTU = 1500


class TunError(OSError):
    """The namespaces or devices could not be set up; the message is for the user."""


def _ip(*args: str) -> None:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True)
    except FileNotFoundError:
        raise TunError("the ip command (iproute2) is not installed") from None
    if done.returncode:
        raise TunError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _tun(name: str) -> int:
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    except OSError as exc:
        raise TunError(f"cannot open /dev/net/tun: {exc.strerror} (needs root)") from None
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


class Namespaces:
    """Network namespaces, ``<name>-a`` and ``<name>-b`` (or one a side named), made on
    entry and deleted on exit (never one that was there before); subclasses join them in
    :meth:`_join`."""

    def __init__(self, name: str, sides: tuple[str, ...] = ("a", "b")) -> None:
        self.names = tuple(f"{name}-{side}" for side in sides)
        self._created: list[str] = []

    def __enter__(self):
        try:
            for namespace in self.names:
                _ip("netns", "add", namespace)
                self._created.append(namespace)
                _ip("-n", namespace, "link", "set", "lo", "up")
            self._join()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _join(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        for namespace in self._created:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True)
        self._created.clear()

    def exec(self, side: int, *command: str) -> list[str]:
        """``command`` run inside side ``side``'s namespace (0: a, 1: b, ...)."""
        return ["ip", "netns", "exec", self.names[side], *command]


class TunPath(Namespaces):
    """Two namespaces joined through this process. Use as a context manager."""

    def __init__(self, forward: PathConfig, backward: PathConfig | None = None, *, name: str = "netblt",
                 seed: int = 1, mtu: int = MTU) -> None:
        super().__init__(name)
        self.mtu = mtu
        self.paths = (Path(forward, seed), Path(backward or PathConfig(delay=forward.delay), seed + 1))
        self._fds: list[int] = []
        self.in_flight: InFlight[tuple[int, bytes]] = InFlight(self.paths)

    def _join(self) -> None:
        for namespace, here, there in zip(self.names, ADDRESSES, reversed(ADDRESSES)):
            device = namespace[:15]  # the device's name, before it moves into its namespace
            self._fds.append(_tun(device))
            _ip("link", "set", device, "netns", namespace)
            _ip("-n", namespace, "addr", "add", here, "peer", there, "dev", device)
            _ip("-n", namespace, "link", "set", device, "mtu", str(self.mtu), "up")

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
        super().close()

    def run(self, until: float = float("inf"), stop=lambda: False) -> None:
        """Relay until the monotonic clock reads ``until`` or ``stop()`` says so."""
        selector = precise_selector()
        for side, fd in enumerate(self._fds):
            selector.register(fd, selectors.EVENT_READ, side)
        try:
            while time.monotonic() < until and not stop():
                now = time.monotonic()
                for fd, packet in self.in_flight.due(now):
                    try:
                        os.write(fd, packet)
                    except OSError:
                        pass  # the far side is not taking packets: lost, as on a real path
                for key, _ in selector.select(self.in_flight.wait(now)):
                    self._read(key.data, time.monotonic())
        finally:
            selector.close()

    def _read(self, side: int, now: float) -> None:
        source, target = self._fds[side], self._fds[1 - side]
        for _ in range(64):
            try:
                packet = os.read(source, self.mtu + 100)
            except BlockingIOError:
                return
            for at, copy in self.paths[side].send(packet, now):
                self.in_flight.add(at, (target, copy))
