"""Each build's engine geometry and network identity, defined once: what its registers describe.

hw/boards.py builds the gateware from these, and the board model (sim/model) takes the
same shapes, so a model of a board holds exactly what its bitstream holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


MAC_ADDRESS = "02:6e:62:6c:74:01"
"""Locally administered (bit 1 of the first byte): a board's address until one is set."""
IP_ADDRESS = "192.168.1.50"
NETMASK, GATEWAY = "255.255.255.0", "0.0.0.0"
"""The routing registers' values after reset (the host link can change both)."""


@dataclass(frozen=True)
class SlotGeometry:
    tx_slots: int
    rx_slots: int
    slot_bytes: int
    max_packets: int
    """Packets a slot's missing-packet bitmap tracks."""
    clock_hz: int = 50_000_000
    data_width: int = 32
    fill: bool = True
    """Whether FILL has a pattern source to run on: data born on the board."""
    check: bool = True
    """Whether a pattern checker watches the sink port."""
    take: bool = True
    """Whether TAKE has a source port to run on: a stream of data born on the board."""
    sink: bool = True
    """Whether DRAIN has a sink port to run on: received buffers out to gateware."""

    def fields(self) -> dict[str, int | bool]:
        return asdict(self)


SIMULATION = SlotGeometry(tx_slots=2, rx_slots=2, slot_bytes=16384, max_packets=1024)
"""The design the tests simulate (hw/node.py with the engine's defaults)."""

BUILDS: dict[str, dict[str, SlotGeometry]] = {
    "colorlight_5a75b": {
        # Both builds: the pattern source and the source port, neither the sink port nor the
        # pattern checker (85% and 89% of the LUTs; with the sink port the block build's
        # placement missed 50 MHz, 47.1, and its router did not converge in 14 minutes).
        "block": SlotGeometry(tx_slots=2, rx_slots=2, slot_bytes=16384, max_packets=1024, check=False, sink=False),
        # 2 MiB each way: 2 slots of 1 MiB (724 packets of 1448 bytes), bitmaps of 4096.
        "dram": SlotGeometry(tx_slots=2, rx_slots=2, slot_bytes=1 << 20, max_packets=4096, check=False,
                             sink=False, clock_hz=45_000_000),
    },
    "versa_ecp5": {
        "block": SlotGeometry(tx_slots=2, rx_slots=2, slot_bytes=32768, max_packets=1024),
        # 64 MB each way: 16 slots of 4 MB (2897 packets of 1448 bytes), bitmaps of 4096. The
        # pattern source, the source port and the sink port, not the pattern checker: with the
        # source and the checker the router did not converge.
        "dram": SlotGeometry(tx_slots=16, rx_slots=16, slot_bytes=4 << 20, max_packets=4096, check=False),
    },
}
"""Per board (make bitstream's names) and slot memory ("block" RAM or "dram")."""
