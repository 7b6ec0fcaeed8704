"""Read levelling of a board's DRAM, run by the host through the engine's DRAM_CSR registers.

ECP5DDRPHY captures each byte lane's ("module's") read data after a delay of 0 to 7 taps
and a bitslip of 0 to 3; which of them land depends on the board, its traces and its
temperature. The LiteX BIOS finds them in software at boot (liblitedram's
``sdram_read_leveling``); the engine has no CPU, so the host does the same search over
the host link when it first opens the board, and then hands the DRAM to the controller.
For each module and bitslip it writes patterns through LiteDRAM's DFI injector and
reads them back at every delay; it keeps the bitslip with the longest run of delays
that read them exactly, and the middle of that run. The registers it drives are
formats/dram_csr.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..formats.dram_csr import DFII_COMMAND, DFII_CONTROL, PRECHARGE_ALL, DramPhy

PATTERN_SEED = 0x9E3779B9


@dataclass(frozen=True)
class ModuleLevel:
    """One byte lane's result: the bitslip and delay chosen, and which delays read the
    pattern exactly under each bitslip (for ``board status``)."""

    bitslip: int
    delay: int
    working: tuple[tuple[bool, ...], ...]


class LevellingFailed(Exception):
    pass


class Injector:
    """LiteDRAM's DFI injector and ECP5DDRPHY's delays, through ``write(address, value)``
    and ``read(address) -> value`` on the core's CSR bus."""

    def __init__(self, phy: DramPhy, write: Callable[[int, int], None], read: Callable[[int], int]) -> None:
        self.phy, self._write, self._read, self.csrs = phy, write, read, phy.csrs

    def write(self, name: str, value: int) -> None:
        self._write(self.csrs[name], value)

    def read(self, name: str) -> int:
        return self._read(self.csrs[name])

    def command(self, phase: int, address: int, bank: int, **command: int) -> None:
        self.write(f"dfii_pi{phase}_address", address)
        self.write(f"dfii_pi{phase}_baddress", bank)
        self.write(f"dfii_pi{phase}_command", DFII_COMMAND.pack(cs=1, **command))
        self.write(f"dfii_pi{phase}_command_issue", 1)

    def software(self) -> None:
        self.write("dfii_control", DFII_CONTROL.pack(cke=1, odt=1, reset_n=1))

    def hand_over(self) -> None:
        self.write("dfii_control", DFII_CONTROL.pack(sel=1))

    def _data(self, phase: int, kind: str, value: int | None = None) -> int:
        """A phase's write data (set to ``value``) or read data, most significant word first."""
        base, words = self.csrs[f"dfii_pi{phase}_{kind}"], self.phy.words
        if value is not None:
            for k in range(words):
                self._write(base + k, value >> 32 * (words - 1 - k) & 0xFFFF_FFFF)
            return value
        result = 0
        for k in range(words):
            result = result << 32 | self._read(base + k)
        return result

    def round_trip(self, pattern: list[int]) -> list[int]:
        """Write one burst of ``pattern`` (a value per phase) at row 0, column 0 of bank 0,
        read it back and close the row: what each phase read."""
        phy = self.phy
        for phase, value in enumerate(pattern):
            self._data(phase, "wrdata", value)
        self.command(0, 0, 0, ras=1)
        self.command(phy.wrphase, 0, 0, cas=1, we=1, wrdata=1)
        self.command(phy.rdphase, 0, 0, cas=1, rddata=1)
        read = [self._data(phase, "rddata") for phase in range(phy.phases)]
        self.command(0, PRECHARGE_ALL, 0, ras=1, we=1)
        return read

    def errors(self, module: int, pattern: list[int]) -> int:
        """Bits of ``module``'s byte lane that read back wrong."""
        lanes = self.phy.modules
        mask = sum(0xFF << 8 * i for i in range(self.phy.phase_bytes) if i % lanes == module)
        return sum(bin((sent ^ got) & mask).count("1") for sent, got in zip(pattern, self.round_trip(pattern)))


def patterns(phy: DramPhy, count: int = 4) -> list[list[int]]:
    """``count`` bursts of pseudo-random data, the same every run (a multiplicative hash)."""
    bits, value, bursts = 8 * phy.phase_bytes, PATTERN_SEED, []
    for _ in range(count):
        burst = []
        for _ in range(phy.phases):
            word = 0
            for _ in range(phy.words):
                value = value * 0x01000193 + 0x5BD1E995 & 0xFFFF_FFFF
                word = word << 32 | value
            burst.append(word & ((1 << bits) - 1))
        bursts.append(burst)
    return bursts


def longest_run(working: tuple[bool, ...]) -> tuple[int, int]:
    """(first, length) of the longest run of True (the first of equals); (0, 0) if none."""
    best, start = (0, 0), None
    for i, ok in enumerate((*working, False)):
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            if i - start > best[1]:
                best = (start, i - start)
            start = None
    return best


def level(injector: Injector) -> list[ModuleLevel]:
    """Level every module's reads, leave each at its chosen bitslip and delay, and
    return them. The DRAM must be in software control; it is left so."""
    phy, levels = injector.phy, []
    bursts = patterns(phy)
    for module in range(phy.modules):
        injector.write("dly_sel", 1 << module)
        injector.write("rdly_dq_bitslip_rst", 1)
        scans = []
        for _bitslip in range(phy.bitslips):
            injector.write("rdly_dq_rst", 1)
            working = []
            for _delay in range(phy.delays):
                working.append(all(injector.errors(module, burst) == 0 for burst in bursts))
                injector.write("rdly_dq_inc", 1)
            scans.append(tuple(working))
            injector.write("rdly_dq_bitslip", 1)
        bitslip = max(range(phy.bitslips), key=lambda b: (longest_run(scans[b])[1], -b))
        first, length = longest_run(scans[bitslip])
        if length == 0:
            injector.write("dly_sel", 0)
            raise LevellingFailed(f"DRAM module {module}: no bitslip and delay reads its pattern back")
        delay = first + (length - 1) // 2
        injector.write("rdly_dq_bitslip_rst", 1)
        for _ in range(bitslip):
            injector.write("rdly_dq_bitslip", 1)
        injector.write("rdly_dq_rst", 1)
        for _ in range(delay):
            injector.write("rdly_dq_inc", 1)
        injector.write("dly_sel", 0)
        levels.append(ModuleLevel(bitslip, delay, tuple(scans)))
    return levels
