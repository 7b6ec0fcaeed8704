"""driver/dram_levelling.py against a model of LiteDRAM's injector and ECP5DDRPHY's read
capture: each byte lane reads back right only at the bitslip and delays its board gives
it, and levelling has to find them through the registers alone."""

from __future__ import annotations

import pytest

from netblt.formats.dram_csr import DFII_COMMAND, DFII_CONTROL, PRECHARGE_ALL, DramPhy, csr_map
from netblt.driver.dram_levelling import Injector, LevellingFailed, level, longest_run
from netblt.formats.registers import DRAM_PHY_WORD

VERSA = DramPhy.read(DRAM_PHY_WORD.pack(levelling=1, phases=2, words=2, rdphase=0, wrphase=1, modules=2,
                                        bitslips=4, delays=8))
"""The Versa's ECP5DDRPHY as its core describes itself (hw/litedram_core.py)."""


class ModelDram:
    """The injector's registers on a CSR bus, a DRAM row behind them, and the PHY's read
    capture: module m reads right only at bitslip ``good[m][0]`` and a delay in
    ``good[m][1]`` (or, given a dict, at each bitslip it names and that bitslip's delays);
    elsewhere its bytes come back shifted."""

    def __init__(self, phy: DramPhy, good: list[tuple[int, range] | dict[int, set[int]]]) -> None:
        self.phy, self.csrs = phy, csr_map(phy.phases, phy.words, phy.levelling)
        self.good = [lane if isinstance(lane, dict) else {lane[0]: set(lane[1])} for lane in good]
        self.names = {address: name for name, address in self.csrs.items()}
        self.registers: dict[int, int] = {}
        self.row_open: int | None = None
        self.stored: list[int] | None = None
        self.read_back: list[int] = [0] * phy.phases
        self.selected = 0
        self.bitslip = [0] * phy.modules
        self.delay = [0] * phy.modules
        self.log: list[str] = []

    def write(self, address: int, value: int) -> None:
        self.registers[address] = value
        name = self.names.get(address)
        if name == "dly_sel":
            self.selected = value
        for m in range(self.phy.modules):
            if self.selected >> m & 1:
                if name == "rdly_dq_rst":
                    self.delay[m] = 0
                elif name == "rdly_dq_inc":
                    self.delay[m] = (self.delay[m] + 1) % self.phy.delays
                elif name == "rdly_dq_bitslip_rst":
                    self.bitslip[m] = 0
                elif name == "rdly_dq_bitslip":
                    self.bitslip[m] = (self.bitslip[m] + 1) % self.phy.bitslips
        if name and name.endswith("_command_issue"):
            self._issue(int(name[len("dfii_pi"):].split("_")[0]))

    def read(self, address: int) -> int:
        for phase in range(self.phy.phases):
            base = self.csrs[f"dfii_pi{phase}_rddata"]
            if base <= address < base + self.phy.words:
                word = self.phy.words - 1 - (address - base)
                return self.read_back[phase] >> 32 * word & 0xFFFF_FFFF
        return self.registers.get(address, 0)

    def _issue(self, phase: int) -> None:
        assert DFII_CONTROL.unpack(self.registers[self.csrs["dfii_control"]])["sel"] == 0, "the controller has it"
        command = DFII_COMMAND.unpack(self.registers[self.csrs[f"dfii_pi{phase}_command"]])
        address = self.registers[self.csrs[f"dfii_pi{phase}_address"]]
        assert command["cs"]
        if command["ras"] and not command["cas"] and not command["we"]:
            self.row_open = address
            self.log.append("activate")
        elif command["ras"] and command["we"] and not command["cas"]:
            assert address & PRECHARGE_ALL
            self.row_open = None
            self.log.append("precharge")
        elif command["cas"] and command["we"] and command["wrdata"]:
            assert self.row_open is not None and phase == self.phy.wrphase
            self.stored = [self._data(p, "wrdata") for p in range(self.phy.phases)]
            self.log.append("write")
        elif command["cas"] and command["rddata"] and not command["we"]:
            assert self.row_open is not None and phase == self.phy.rdphase and self.stored is not None
            self.read_back = [self._captured(value) for value in self.stored]
            self.log.append("read")
        else:
            raise AssertionError(f"not a command levelling issues: {command}")

    def _data(self, phase: int, kind: str) -> int:
        base, value = self.csrs[f"dfii_pi{phase}_{kind}"], 0
        for k in range(self.phy.words):
            value = value << 32 | self.registers.get(base + k, 0)
        return value

    def _captured(self, value: int) -> int:
        """What the PHY hands on: each module's bytes right, or rotated by a bit."""
        out = 0
        for byte in range(self.phy.phase_bytes):
            m, b = byte % self.phy.modules, value >> 8 * byte & 0xFF
            if self.delay[m] not in self.good[m].get(self.bitslip[m], ()):
                b = (b << 1 | b >> 7) & 0xFF
            out |= b << 8 * byte
        return out


def levelled(good: list[tuple[int, range] | dict[int, set[int]]]) -> tuple[ModelDram, list]:
    dram = ModelDram(VERSA, good)
    injector = Injector(VERSA, dram.write, dram.read)
    injector.software()
    return dram, level(injector)


def test_each_module_is_left_at_its_bitslip_and_the_middle_of_its_delays():
    dram, levels = levelled([(2, range(3, 8)), (1, range(0, 4))])
    assert [(m.bitslip, m.delay) for m in levels] == [(2, 5), (1, 1)]
    assert dram.bitslip == [2, 1] and dram.delay == [5, 1] and dram.selected == 0
    assert levels[0].working[2] == tuple(d in range(3, 8) for d in range(8))
    assert not any(any(levels[0].working[b]) for b in (0, 1, 3))
    # Every round trip opens the row, writes, reads and closes it, in that order.
    assert dram.log[:4] == ["activate", "write", "read", "precharge"] and len(dram.log) % 4 == 0


def test_a_module_whose_reads_land_nowhere_fails_levelling():
    with pytest.raises(LevellingFailed, match="DRAM module 1: no bitslip and delay reads its pattern back"):
        levelled([(0, range(2, 4)), (0, range(0))])


def test_the_longest_run_of_working_delays_wins():
    assert longest_run((True, False, True, True, True, False, True, True)) == (2, 3)
    assert longest_run((False,) * 8) == (0, 0)
    assert longest_run((True,) * 8) == (0, 8)


def test_a_bitslip_with_more_working_delays_in_pieces_loses_to_one_unbroken_run():
    """A lane that reads right at several bitslips, at one of them at more delays but
    broken in two: the middle of the longest unbroken run is the margin, whatever the
    count (a real board's eye can have such gaps)."""
    dram, levels = levelled([{0: {0, 1, 2, 5, 6}, 1: {2, 3, 4, 5}}, (3, range(1, 6))])
    assert [(m.bitslip, m.delay) for m in levels] == [(1, 3), (3, 3)]
    assert dram.bitslip == [1, 3] and dram.delay == [3, 3]
