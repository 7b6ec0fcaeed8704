"""The NETBLT data path in Amaranth 0.5: the per-packet half of RFC 998 in gateware.

Board-independent components with `amaranth.lib.wiring` signatures; the network side is
an IP-payload stream (LiteEth's IPv4 layer sits below it). docs/architecture.md maps the
blocks to the RFC; docs/register-map.md is the host's view of the engine.
"""
