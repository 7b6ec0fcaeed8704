"""A gigabit Ethernet between two network namespaces (needs root), at any MTU.

The TUN relay (:mod:`.tun_path`) models loss and delay but carries about 100 Mb/s, one
Python step a packet; a host-to-host gigabit link needs the kernel's own path: a veth
pair, each end's transmit held to the line's rate by a token bucket (``tc tbf``; this
kernel has no netem, but tbf is there). Side a is 10.78.0.1 and side b 10.78.0.2, each
only inside its namespace. :class:`VethStar` joins several senders' namespaces to one
station's, each by a pair of its own (host/station.py's senders at once). Use as a context
manager; the namespaces (and the pairs) go when it ends.
"""

from __future__ import annotations

from ...formats.ethernet import FCS, PREAMBLE_AND_GAP
from .tun_path import Namespaces, TunError, _ip

ADDRESSES = ("10.78.0.1", "10.78.0.2")
"""Side a's and side b's address; they exist only inside the two namespaces."""
WIRE_OVERHEAD = FCS + PREAMBLE_AND_GAP
"""Bytes a frame takes on the wire beyond what the kernel counts (its Ethernet header),
so the bucket's gigabit is the wire's."""
BUCKET = "1mb"
"""The token bucket's depth: tbf needs at least the rate over the kernel's tick."""


class VethPath(Namespaces):
    """Two namespaces joined by a veth pair at ``mtu``, each way held to ``rate`` (tc's units)."""

    def __init__(self, mtu: int, rate: str = "1gbit", *, name: str = "netblt-gig") -> None:
        super().__init__(name)
        self.mtu, self.rate = mtu, rate

    def _join(self) -> None:
        _line(((self.names[0], "nbveth-a", ADDRESSES[0]), (self.names[1], "nbveth-b", ADDRESSES[1])),
              self.mtu, self.rate)


class VethStar(Namespaces):
    """A station's namespace (side 0) and ``count`` senders' (sides 1 to count), sender i
    joined to the station by a veth pair of its own at ``mtu``, each way held to ``rate``:
    the station is :meth:`station_address` (i) on pair i, the sender the next address."""

    def __init__(self, count: int, rate: str, mtu: int = 1500, *, name: str = "netblt-star") -> None:
        super().__init__(name, ("station", *(f"s{i}" for i in range(1, count + 1))))
        self.count, self.mtu, self.rate = count, mtu, rate

    @staticmethod
    def station_address(i: int) -> str:
        return f"10.79.{i}.1"

    def _join(self) -> None:
        for i in range(1, self.count + 1):
            _line(((self.names[0], f"nbstar{i}-st", self.station_address(i)),
                   (self.names[i], f"nbstar{i}-s", f"10.79.{i}.2")), self.mtu, self.rate)


class RoutedPath(Namespaces):
    """A sender's namespace (side 0), a router's (1) and a receiver's (2), joined by two
    veth pairs at 1,500 bytes with the router forwarding between them. :meth:`narrow`
    lowers the router's MTU toward the receiver mid-transfer, as a tunnel or a VPN coming
    up does: the router then answers each datagram that no longer fits (netblt sets
    don't-fragment) with ICMP "fragmentation needed"."""

    SENDER, RECEIVER = "10.80.1.2", "10.80.2.2"

    def __init__(self, *, name: str = "netblt-routed") -> None:
        super().__init__(name, ("sender", "router", "receiver"))

    def _join(self) -> None:
        sender, router, receiver = self.names
        _line(((sender, "nbr-s", self.SENDER), (router, "nbr-rs", "10.80.1.1")))
        _line(((router, "nbr-rr", "10.80.2.1"), (receiver, "nbr-r", self.RECEIVER)))
        _ip("-n", sender, "route", "add", "default", "via", "10.80.1.1")
        _ip("-n", receiver, "route", "add", "default", "via", "10.80.2.1")
        _ip("netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1")

    def narrow(self, mtu: int) -> None:
        """The router's link toward the receiver now carries at most ``mtu`` bytes a packet."""
        _ip("-n", self.names[1], "link", "set", "nbr-rr", "mtu", str(mtu))


def _line(ends: tuple[tuple[str, str, str], tuple[str, str, str]], mtu: int = 1500, rate: str = "") -> None:
    """A veth pair between two namespaces, each end (namespace, device, address) on a /24
    of its own, at ``mtu``; with ``rate``, each way held to it as a wire would be."""
    (near, near_device, _), (far, far_device, _) = ends
    _ip("link", "add", near_device, "netns", near, "type", "veth", "peer", "name", far_device, "netns", far)
    for namespace, device, address in ends:
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", device)
        if not rate:
            _ip("-n", namespace, "link", "set", device, "mtu", str(mtu), "up")
            continue
        # One packet an skb, as on the wire: the bucket charges each its framing.
        _ip("-n", namespace, "link", "set", device, "mtu", str(mtu), "gso_max_segs", "1", "up")
        _tc(namespace, "qdisc", "add", "dev", device, "root", "stab", "overhead", str(WIRE_OVERHEAD),
            "linklayer", "ethernet", "tbf", "rate", rate, "burst", BUCKET, "latency", "20ms")


def _tc(namespace: str, *args: str) -> None:
    try:
        _ip("netns", "exec", namespace, "tc", *args)
    except TunError as exc:
        raise TunError(f"{exc} (tc's tbf qdisc is needed for the line's rate)") from None
