"""``netblt sim-board --model``: the board's functional model on loopback, at host speed.

The same two UDP sockets as ``netblt sim-board`` (the host link, and the board's
NETBLT port), the same printed lines, and the same WAN between the NETBLT port and its
peers, in real time here. ``link_delay`` puts a round trip between host and board, as a
cable and a switch would. Datagrams go to loopback only; any other destination is
counted and dropped, as the simulated board's bridge does.
"""

from __future__ import annotations

import heapq
import ipaddress
import itertools
import select
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from ...driver.transport import coalesce, datagrams, deep_receive_queue, segment_runs, segmented, system_drops
from ...formats import host_link as F
from ...formats.boards import BUILDS, SIMULATION, SlotGeometry
from ...formats.registers import BOARD_NAMES
from .. import frames
from ..drops import DropReport
from ..wan.netem import Path as WanPath, PathConfig, describe
from .engine_model import EngineModel
from .host_link import HostLink

BATCH = 64
"""Datagrams taken from one socket per look (a read brings as many as the host's
segmented send held: the look may take a read's more)."""
IP_UDP = frames.IPV4.size + frames.UDP.size

Send = Callable[[], None]


class Served:
    """The model behind two sockets: ``settings`` are sim-board's (sim_commands.py)."""

    def __init__(self, geometry: SlotGeometry, settings: dict, board: str | None = None) -> None:
        number = next((n for n, name in BOARD_NAMES.items() if name == board), 0)
        self.engine = EngineModel(geometry, board=number)
        self.link = HostLink(self.engine)
        self.mtu, self.link_delay = settings["mtu"], settings.get("link_delay", 0.0)
        self.link_address = settings.get("link_address", "127.0.0.1")
        self.link_socket = _bind(settings["link_port"], self.link_address)
        self.netblt_socket = _bind(settings["netblt_port"])
        self.netblt_port = self.netblt_socket.getsockname()[1]
        self.wan_config = PathConfig(delay=settings["wan_delay"], loss=settings["wan_loss"])
        self.wan = {way: WanPath(self.wan_config, settings["wan_seed"] + i)
                    for i, way in enumerate(("to the board", "to the peer"))}
        self.later: list[tuple[float, int, Send]] = []
        self.order = itertools.count()
        self.counts: Counter[str] = Counter()
        self.drops = DropReport(self.counts)
        self.pcap = frames.Pcap(Path(settings["pcap"]), frames.LINKTYPE_RAW) if settings.get("pcap") else None

    # -- the loop -------------------------------------------------------------------------------------

    def run(self, stop: Callable[[], bool]) -> None:
        """What came in is taken before what is due goes out: a host's ACK that came while
        a burst was sent must reach the link before its push times out (it was pushed twice)."""
        while not stop():
            now = time.monotonic()
            wait = self._next(now) - now
            readable, _, _ = select.select([self.link_socket, self.netblt_socket], [], [], max(0.0, min(wait, 0.05)))
            now = time.monotonic()
            for sock in readable:
                self._take(sock, now)
            self._due(time.monotonic())
            if (line := self.drops.line(now)) is not None:
                print(line, flush=True)

    def _next(self, now: float) -> float:
        """When the loop must look again, at the latest: a paced packet, a timed delivery,
        a push to send again."""
        times = [now + 0.05]
        if self.link.push_sent is not None:
            times.append(self.link.push_sent_at + self.link.settings["PUSH_TIMEOUT"] / self.engine.geometry.clock_hz)
        elif self.link.events_since is not None:
            times.append(self.link.hold_ends())
        if (due := self.engine.next_due()) is not None:
            times.append(due)
        if self.later:
            times.append(self.later[0][0])
        return min(times)

    def _due(self, now: float) -> None:
        while self.later and self.later[0][0] <= now:
            heapq.heappop(self.later)[2]()
        for datagram, to, starts in self.engine.outgoing(now):
            self._to_peer(datagram, to, starts)
        self._to_host(self.link.pushes(now), self.link.owner, now)

    def _take(self, sock: socket.socket, now: float) -> None:
        count = 0
        while count < BATCH:
            try:
                taken, source = datagrams(sock)
            except (BlockingIOError, ConnectionRefusedError):
                return
            count += len(taken)
            for datagram in taken:
                if len(datagram) + IP_UDP > self.mtu:
                    self.counts[f"datagrams in over the {self.mtu}-byte MTU (dropped)"] += 1
                    continue
                self.counts["datagrams in"] += 1
                if sock is self.link_socket:
                    self._at(now + self.link_delay, lambda d=datagram, s=source: self._link_request(d, s))
                else:
                    self._wan("to the board", datagram, now, lambda d=datagram, s=source: self._netblt(d, s))

    def _link_request(self, datagram: bytes, source: tuple[str, int]) -> None:
        now = time.monotonic()
        self._record(datagram, source, (self.link_address, F.LINK_PORT), now)
        self._to_host(self.link.receive(datagram, source, now), source, now)
        self._to_host(self.link.pushes(now), self.link.owner, now)

    def _netblt(self, datagram: bytes, source: tuple[str, int]) -> None:
        now = time.monotonic()
        self._record(datagram, source, ("127.0.0.1", self.netblt_port), now)
        self.engine.arrive(datagram, source, now)
        self._to_host(self.link.pushes(now), self.link.owner, now)

    def _to_host(self, replies: list[bytes], to: tuple[str, int], now: float) -> None:
        """Replies and pushes, those of equal size in one segmented send (a DOWNLOAD's
        replies come to the host together, as a board's do at line rate, not a wake each)."""
        for reply in replies:
            self._record(reply, (self.link_address, F.LINK_PORT), to, now)
        for start, end in segment_runs([len(r) for r in replies]):
            run = replies[start:end]
            self._at(now + self.link_delay, lambda run=run: self._out_run(run, to))

    def _out_run(self, run: list[bytes], to: tuple[str, int]) -> None:
        if len(run) > 1:
            try:
                self.link_socket.sendmsg([b"".join(run)], segmented(len(run[0])), 0, to)
                self.counts["datagrams out"] += len(run)
                return
            except OSError:
                pass  # no segmentation offload here, or the host refused: one at a time says which
        for datagram in run:
            self._out(self.link_socket, datagram, to)

    def _to_peer(self, datagram: bytes, to: tuple[str, int], now: float) -> None:
        if not to[1]:
            self.counts["NETBLT natively on IP, which the model does not carry (dropped)"] += 1
            return
        self._record(datagram, ("127.0.0.1", self.netblt_port), to, now)  # on the board's wire: before the WAN
        self._wan("to the peer", datagram, now, lambda: self._out(self.netblt_socket, datagram, to))

    def _wan(self, way: str, datagram: bytes, now: float, deliver: Send) -> None:
        for at, _copy in self.wan[way].send(datagram, now):
            self._at(at, deliver)

    def _at(self, when: float, action: Send) -> None:
        if when <= time.monotonic():
            action()
        else:
            heapq.heappush(self.later, (when, next(self.order), action))

    def _out(self, sock: socket.socket, datagram: bytes, to: tuple[str, int]) -> None:
        if sock is self.netblt_socket and not _loopback(to[0]):  # the host link answers only who asked it
            self.counts[f"from the board to {to[0]}, not loopback (dropped)"] += 1
            return
        try:
            sock.sendto(datagram, to)
            self.counts["datagrams out"] += 1
        except OSError:
            self.counts["datagrams out that the host refused"] += 1

    def _record(self, datagram: bytes, source: tuple[str, int], to: tuple[str, int], now: float) -> None:
        """Into the pcap as an IPv4 packet, stamped with the wall clock's time at ``now``
        (no UDP checksum: one would cost the model's loop some 4 us a packet)."""
        if self.pcap is not None:
            packet = frames.udp(source[0], to[0], source[1], to[1], datagram, checksum=False)
            self.pcap.write(packet, time.time() - (time.monotonic() - now))

    # -- what it prints ---------------------------------------------------------------------------------

    def banner(self) -> list[str]:
        g = self.engine.geometry
        lines = [f"management {self.link_address}:{self.link_socket.getsockname()[1]}",
                 f"netblt 127.0.0.1:{self.netblt_port} (the board's NETBLT UDP port is {self.netblt_port})",
                 f"a functional model at host speed: {g.tx_slots} transmit and {g.rx_slots} receive slots of "
                 f"{g.slot_bytes} bytes, {g.clock_hz / 1e6:g} MHz"]
        if self.wan_config != PathConfig():
            lines.append(f"WAN between the board's NETBLT port and its peers: {describe(self.wan_config)}, "
                         "in real time")
        if self.link_delay:
            lines.append(f"host link: {self.link_delay * 1e6:g} us each way")
        return lines

    def summary(self, wall: float) -> list[str]:
        lines = [f"ran {wall:.1f} s in real time"]
        lines += [f"  {what}: {count}" for what, count in sorted(self.counts.items())]
        dropped = sum(system_drops(sock) or 0 for sock in (self.link_socket, self.netblt_socket))
        if dropped:  # the host sees these as lost on the way; a board would have taken them
            lines.append(f"  datagrams the system dropped before the model took them (its queue full): {dropped}")
        lines.append(f"WAN: {describe(self.wan_config)}")
        for way, path in self.wan.items():
            counts = ", ".join(f"{what} {count}" for what, count in sorted(path.counts.items()))
            lines.append(f"  NETBLT datagrams {way}: {counts or 'none'}")
        return lines

    def close(self) -> None:
        for sock in (self.link_socket, self.netblt_socket):
            sock.close()
        if self.pcap is not None:
            self.pcap.close()


class ListenError(Exception):
    """A port to listen on is taken; the message names it."""


def _bind(port: int, address: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        raise ListenError(f"cannot listen on {address}:{port}: {exc.strerror}") from None
    sock.setblocking(False)
    coalesce(sock)  # a host's segmented sends come in one read, as on the host's own socket
    # A board takes DATA at its line's rate whatever its host link is doing; this one loop
    # serves both, and DATA that came during a download overflowed a queue of the system's
    # limit (4,000-5,900 packets of 256 MiB at defaults, each then asked for again).
    deep_receive_queue(sock)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    return sock


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def serve(board: str | None, slots: str, settings: dict) -> int:
    """Run the model until SIGINT or SIGTERM, then print what it carried."""
    try:
        served = Served(BUILDS[board][slots] if board else SIMULATION, settings, board)
    except ListenError as exc:
        print(f"netblt sim-board: error: {exc}", file=sys.stderr)
        return 1
    stopped: list[bool] = []
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stopped.append(True))
    for line in served.banner():
        print(line, flush=True)
    started = time.monotonic()
    try:
        served.run(lambda: bool(stopped))
    finally:
        for line in served.summary(time.monotonic() - started):
            print(line, flush=True)
        served.close()
    return 0
