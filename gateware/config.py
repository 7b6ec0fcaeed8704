"""The engine's build-time geometry: one place for every size the blocks share."""

from __future__ import annotations

from dataclasses import dataclass

from ..formats import rfc998 as L
from ..formats.registers import COMMAND_WORD, EVENT_WORD

MAX_SLOTS = 1 << min(COMMAND_WORD.width("slot"), EVENT_WORD.width("slot"))
"""Slots each way: as many as the commands' and events' slot fields number."""


LINE_WORDS = 512
"""Engine words in a DRAM store's staging line: 2 KiB, a 1500-byte packet at any phase."""


@dataclass(frozen=True)
class DramGeometry:
    """Slots in DRAM, on a LiteDRAM core's two native ports (hw/litedram_core.py writes
    both numbers into the core's description): the transmit slots in the chip's lower
    half through one port, the receive slots in its upper half through the other."""

    address_bits: int
    """A native port's address bits, in DRAM words: the whole chip."""
    data_bits: int
    """A DRAM word: the native port's width."""
    line_words: int = LINE_WORDS
    phy: int = 0
    """What DRAM_PHY reads (registers.DRAM_PHY_WORD): the PHY's shape for the host's port
    to the core's registers; 0: the core has no such port."""

    @classmethod
    def of(cls, description: dict) -> DramGeometry:
        """The geometry of the core a description (hw/litedram_core.py) describes."""
        return cls(description["address_bits"], description["data_bits"], phy=description.get("phy", 0))

    @property
    def receive_base(self) -> int:
        """The DRAM word where the receive slots start: half the chip."""
        return 1 << self.address_bits - 1

    @property
    def half_words(self) -> int:
        """Engine words in half the chip: each store's region."""
        return self.receive_base * self.data_bits // 32


@dataclass(frozen=True)
class EngineConfig:
    """Sizes fixed when the gateware is built; everything else is a run-time register."""

    data_width: int = 32
    """Bits per beat of the network streams and the buffer memories: 32 or 64 (the
    transmit and receive sides take both; the engine top, 32 only)."""
    clock_hz: int = 50_000_000
    """The one system clock; the pacer counts its cycles."""
    tx_slots: int = 2
    rx_slots: int = 2
    slot_bytes: int = 16384
    """Bytes per buffer slot: the largest NETBLT buffer the engine holds."""
    max_packets: int = 1024
    """Packets per slot the bitmaps track; with ``slot_bytes`` it sets the smallest packet."""
    fifo_depth: int = 512
    """Words in each control-packet FIFO and entries in the event FIFO."""
    fill: bool = True
    """The FILL command: a pattern source that writes transmit slots, so data born on the
    board goes out with the host doing control only."""
    check: bool = True
    """A pattern checker watching the sink port: DRAINED says how many words were not their
    buffer's test pattern (``recv --sink check``)."""
    take: bool = True
    """The TAKE command: the source port (gateware/source_port.py), a stream that fills
    transmit slots as its words come."""
    sink: bool = True
    """The DRAIN command: the sink port (gateware/sink_port.py), received buffers out to
    gateware. Without FILL, TAKE or DRAIN (the crowded builds leave some out) the command
    is rejected and counted; without the sink port there is no checker either."""
    dram: DramGeometry | None = None
    """Where the slots live: block RAM (None), or DRAM through the engine's ``tx_dram``
    and ``rx_dram`` ports, which the caller connects to a LiteDRAM core."""
    counter_delay: int = 1
    """Cycles from a counter's strobe to its count, 1 or 2. At 2 each strobe passes two
    registers, the first free to sit by it: on a crowded part (the Colorlight's DRAM
    build) the paths from deep in the data path to the counters were the slowest."""

    def __post_init__(self) -> None:
        problems = [
            (self.data_width in (32, 64), "data width must be 32 or 64 bits"),
            (self.slot_bytes % self.beat_bytes == 0, "slot size must be a whole number of beats"),
            (_power_of_two(self.slot_words), "slot size in beats must be a power of two"),
            (_power_of_two(self.max_packets) and self.max_packets >= 32,
             "max packets must be a power of two, at least 32"),
            (self.max_packets <= 1 << (8 * L.DATA.field("packet").width),
             "max packets exceeds the 16-bit packet number"),
            (1 <= self.tx_slots <= MAX_SLOTS and 1 <= self.rx_slots <= MAX_SLOTS, f"slots must be 1..{MAX_SLOTS}"),
            (self.clock_hz > 0, "clock must be positive"),
            (self.counter_delay in (1, 2), "counter delay must be 1 or 2 cycles"),
            (self.dram is None or self.data_width == 32, "slots in DRAM take 32-bit engine words"),
            (self.dram is None or max(self.tx_slots, self.rx_slots) * self.slot_words <= self.dram.half_words,
             "the slots do not fit half the DRAM"),
        ]
        for ok, message in problems:
            if not ok:
                raise ValueError(message)

    @property
    def beat_bytes(self) -> int:
        return self.data_width // 8

    @property
    def slot_words(self) -> int:
        return self.slot_bytes // self.beat_bytes

    @property
    def tx_address_width(self) -> int:
        """Address bits of the transmit slot memory (all slots, one beat per address)."""
        return (self.tx_slots * self.slot_words - 1).bit_length()

    @property
    def rx_address_width(self) -> int:
        return (self.rx_slots * self.slot_words - 1).bit_length()

    @property
    def bitmap_words(self) -> int:
        """32-bit bitmap words per slot."""
        return self.max_packets // 32


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0
