"""The payloads the engine's streams carry, and the connection both sides read."""

from __future__ import annotations

from amaranth.lib import data, stream


CONNECTION = {
    "local_port": 16,
    "peer_port": 16,
    "peer_address": 32,
    "udp": 1,
    "udp_local_port": 16,
    "udp_peer_port": 16,
    "data_checksum": 1,
}
"""The connection registers, as fields: both sides' settings layouts start from these."""


def ip_payload(data_width: int) -> data.StructLayout:
    """One beat of an IP payload, the interface to LiteEth's IPv4 layer.

    ``keep`` marks the bytes of the beat that belong to the payload (contiguous from
    lane 0); ``address`` is the peer (destination on transmit, source on receive);
    ``protocol`` and ``length`` (payload bytes) hold for the whole packet; ``error`` on
    the last beat says the link layer found the frame damaged.
    """
    return data.StructLayout({
        "data": data_width,
        "keep": data_width // 8,
        "last": 1,
        "address": 32,
        "protocol": 8,
        "length": 16,
        "error": 1,
    })


def ip_stream(data_width: int) -> stream.Signature:
    return stream.Signature(ip_payload(data_width))


DATA_HEADER = data.StructLayout({
    "buffer": 32,
    "packet": 16,
    "high_ack": 16,
    "length": 16,
    "ldata": 1,
    "last_buffer": 1,
})
"""What the receive side needs of a checked DATA/LDATA header; ``length`` is data bytes."""


def rx_data(data_width: int) -> data.StructLayout:
    """A DATA/LDATA payload beat from the parser, with its packet's header.

    ``keep`` marks data-area bytes only (never padding); ``bad`` on the last beat says
    a check that needed the whole packet (truncation, data checksum) failed.
    """
    return data.StructLayout({
        "data": data_width,
        "keep": data_width // 8,
        "last": 1,
        "bad": 1,
        "header": DATA_HEADER,
    })
