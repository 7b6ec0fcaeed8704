"""The ground: every format netblt's parts agree on, defined once, as data.

NETBLT packets (rfc998), host-link datagrams (host_link), the engine's registers with
their command, event and flag words and pacing modes (registers), drop reasons (drops),
the DRAM core's CSR map (dram_csr) and the Internet checksum (checksum). The protocol
core, the data paths, the gateware, the boards and the docs all derive from these; this
package imports nothing else of netblt, and no Amaranth.
"""
