"""A LiteDRAM core's CSR registers that read levelling drives, and the DRAM_PHY word.

The registers' places on the core's CSR bus are LiteDRAM's; they are written down here
once, as data: driver/dram_levelling.py drives them and hw/litedram_core.py checks them
against the core it generates.
"""

from __future__ import annotations

from dataclasses import dataclass

from .layout import Word
from .registers import DRAM_PHY_WORD

DFII_CONTROL = Word("DFII_CONTROL", (("sel", 1), ("cke", 1), ("odt", 1), ("reset_n", 1)))
"""The injector's control: ``sel`` gives the DRAM to the controller; the rest drive the pins
while the software has it."""
DFII_COMMAND = Word("DFII_COMMAND", (("cs", 1), ("we", 1), ("cas", 1), ("ras", 1), ("wrdata", 1), ("rddata", 1)))
"""A command the injector puts on one phase (each bit asserts that pin: low on the wire)."""
PHASE_PARTS = ("command", "command_issue", "address", "baddress")
"""A phase's registers before its data, one word each; its write data and read data follow."""
PHY_BANK = 512
"""ECP5DDRPHY's registers: the core's second CSR bank (LiteX's 2 KiB pages of 32-bit words)."""
PHY_PARTS = ("dly_sel", "rdly_dq_rst", "rdly_dq_inc", "rdly_dq_bitslip_rst", "rdly_dq_bitslip",
             "burstdet_clr", "burstdet_seen")
PRECHARGE_ALL = 1 << 10
"""A10 high: a precharge closes every bank."""


def csr_map(phases: int, words: int, phy: bool) -> dict[str, int]:
    """Each register's CSR word address, by LiteDRAM's name: ``phases`` phases whose data
    take ``words`` words each (the most significant first), and with ``phy`` ECP5DDRPHY's."""
    address, at = {"dfii_control": 0}, 1
    for n in range(phases):
        for part in PHASE_PARTS:
            address[f"dfii_pi{n}_{part}"] = at
            at += 1
        address[f"dfii_pi{n}_wrdata"], address[f"dfii_pi{n}_rddata"] = at, at + words
        at += 2 * words
    if phy:
        address |= {part: PHY_BANK + i for i, part in enumerate(PHY_PARTS)}
    return address


@dataclass(frozen=True)
class DramPhy:
    levelling: bool
    phases: int
    words: int
    rdphase: int
    wrphase: int
    modules: int
    bitslips: int
    delays: int

    @classmethod
    def read(cls, word: int) -> DramPhy:
        fields = DRAM_PHY_WORD.unpack(word)
        return cls(levelling=bool(fields.pop("levelling")), **fields)

    @property
    def csrs(self) -> dict[str, int]:
        return csr_map(self.phases, self.words, self.levelling)

    @property
    def phase_bytes(self) -> int:
        return 4 * self.words
