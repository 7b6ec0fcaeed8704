"""What a packet costs on gigabit Ethernet, for comparing the engine with the wire."""

from __future__ import annotations

from ..formats.ethernet import FCS, MAC_HEADER, MIN_FRAME, PREAMBLE_AND_GAP

GIGABIT_NS_PER_BYTE = 8
IPV4_HEADER, UDP_HEADER = 20, 8


def wire_bytes(ip_payload: int) -> int:
    """Bytes of line time one IPv4 packet with this payload takes, gaps included."""
    frame = max(MAC_HEADER + IPV4_HEADER + ip_payload + FCS, MIN_FRAME)
    return frame + PREAMBLE_AND_GAP


def wire_cycles(ip_payload: int, clock_hz: float) -> float:
    return wire_bytes(ip_payload) * GIGABIT_NS_PER_BYTE * clock_hz / 1e9
