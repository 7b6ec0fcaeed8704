"""A gigabit Ethernet between two network namespaces (needs root), at any MTU.

The TUN relay (:mod:`.tun_path`) models loss and delay but carries about 100 Mb/s, one
Python step a packet; a host-to-host gigabit link needs the kernel's own path: a veth
pair, each end's transmit held to the line's rate by a token bucket (``tc tbf``; this
kernel has no netem, but tbf is there). Side a is 10.78.0.1 and side b 10.78.0.2, each
only inside its namespace. Use as a context manager; the namespaces (and the pair) go when
it ends.
"""

from __future__ import annotations

from .tun_path import NamespacePair, TunError, _ip

ADDRESSES = ("10.78.0.1", "10.78.0.2")
"""Side a's and side b's address; they exist only inside the two namespaces."""
WIRE_OVERHEAD = 24
"""Bytes a frame takes on the wire beyond what the kernel counts (its Ethernet header):
preamble 8, FCS 4 and the gap 12, so the bucket's gigabit is the wire's."""
BUCKET = "1mb"
"""The token bucket's depth: tbf needs at least the rate over the kernel's tick."""


class VethPath(NamespacePair):
    """Two namespaces joined by a veth pair at ``mtu``, each way held to ``rate`` (tc's units)."""

    def __init__(self, mtu: int, rate: str = "1gbit", *, name: str = "netblt-gig") -> None:
        super().__init__(name)
        self.mtu, self.rate = mtu, rate

    def _join(self) -> None:
        _ip("link", "add", "nbveth-a", "netns", self.names[0], "type", "veth", "peer", "name", "nbveth-b",
            "netns", self.names[1])
        for namespace, device, address in zip(self.names, ("nbveth-a", "nbveth-b"), ADDRESSES):
            _ip("-n", namespace, "addr", "add", f"{address}/30", "dev", device)
            # One packet an skb, as on the wire: the bucket charges each its framing.
            _ip("-n", namespace, "link", "set", device, "mtu", str(self.mtu), "gso_max_segs", "1", "up")
            _tc(namespace, "qdisc", "add", "dev", device, "root", "stab", "overhead", str(WIRE_OVERHEAD),
                "linklayer", "ethernet", "tbf", "rate", self.rate, "burst", BUCKET, "latency", "20ms")


def _tc(namespace: str, *args: str) -> None:
    try:
        _ip("netns", "exec", namespace, "tc", *args)
    except TunError as exc:
        raise TunError(f"{exc} (tc's tbf qdisc is needed for the line's rate)") from None
