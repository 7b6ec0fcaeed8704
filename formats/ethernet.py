"""Ethernet's framing: what a frame costs on the wire besides the IP packet it carries."""

from __future__ import annotations

MAC_HEADER, FCS, MIN_FRAME = 14, 4, 64
PREAMBLE_AND_GAP = 8 + 12
"""Preamble with start delimiter, and the minimum inter-frame gap."""
FRAMING = MAC_HEADER + FCS + PREAMBLE_AND_GAP
"""Bytes of line time a frame takes beyond its IP packet (38)."""
