"""The receive stores (gateware/receive_store.py), block RAM and DRAM, driven alike:
packets opened at any word of any slot, written with gaps, a partial last word, then
committed or dropped; reads from seeks anywhere, with stalls, some abandoned by a new
seek. Each read is compared with a model of what the store must hold: in DRAM a dropped
packet changes nothing; in block RAM its words may hold anything until rewritten.

NETBLT_TB_DRAM_DESCRIPTION is the DRAM core's description, or ``null`` for block RAM."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout
from dram_harness import STORE_CONFIG
from dram_tb import count_refreshes

from netblt.sim.rtl.beats import BeatSource, take
from netblt.sim.rtl.testbench import DRAM, start

DESCRIPTION = DRAM
SLOT_WORDS = STORE_CONFIG.slot_words


class Store:
    def __init__(self, dut, rng: random.Random) -> None:
        self.dut, self.rng = dut, rng
        self.opens = BeatSource(dut, "open", None, idle=0.3, rng=rng)
        self.model: dict[int, int | None] = {}  # byte -> value; None: may hold anything
        dut.write__en.value = dut.close__valid.value = dut.seek__valid.value = dut.read__ready.value = 0

    async def packet(self, address: int, words: list[int], keep: int, commit: bool) -> None:
        await self.opens.send([address])
        for i, word in enumerate(words):
            while self.rng.random() < 0.2:
                self.dut.write__en.value = 0
                await RisingEdge(self.dut.clk)
            mask = keep if i == len(words) - 1 else 0xF
            self.dut.write__addr.value, self.dut.write__data.value, self.dut.write__en.value = address + i, word, mask
            await RisingEdge(self.dut.clk)
            for byte in range(4):
                if mask >> byte & 1:
                    key = 4 * (address + i) + byte
                    if commit:
                        self.model[key] = word >> 8 * byte & 0xFF
                    elif not DESCRIPTION:
                        self.model[key] = None
        self.dut.write__en.value = 0
        self.dut.close__valid.value, self.dut.close__payload.value = 1, int(commit)
        await RisingEdge(self.dut.clk)
        self.dut.close__valid.value = 0

    async def seek(self, address: int) -> None:
        self.dut.seek__valid.value, self.dut.seek__payload.value = 1, address
        await RisingEdge(self.dut.clk)
        self.dut.seek__valid.value = 0

    async def take(self, count: int, stall: float) -> list[int]:
        def level_matches() -> None:
            # A reader with latency asks for ``level`` words: they must be there.
            assert bool(self.dut.read__valid.value) == (int(self.dut.level.value) > 0)
        return await take(self.dut, "read", count, stall=stall, rng=self.rng, check=level_matches)

    def check(self, address: int, got: list[int], what: str) -> int:
        """Compares every byte the model knows; returns how many."""
        known = 0
        for i, word in enumerate(got):
            for byte in range(4):
                want = self.model.get(4 * (address + i) + byte)
                if want is not None:
                    known += 1
                    assert word >> 8 * byte & 0xFF == want, (
                        f"{what}: word {address + i:#x} byte {byte} is {word >> 8 * byte & 0xFF:#04x}, not {want:#04x}")
        return known


@cocotb.test()
async def test_packets_and_reads(dut):
    await start(dut)
    rng = random.Random(23)
    store = Store(dut, rng)
    refreshes = [0]
    if DESCRIPTION:
        cocotb.start_soon(count_refreshes(dut, dut.dram.core, refreshes))
    slots = STORE_CONFIG.rx_slots

    # Every slot written whole first, so reads have something known everywhere.
    for slot in range(slots):
        for at in range(0, SLOT_WORDS, 500):
            n = min(500, SLOT_WORDS - at)
            await store.packet(slot * SLOT_WORDS + at, [rng.getrandbits(32) for _ in range(n)], 0xF, True)

    known = dropped = 0
    for round_ in range(120):
        slot, n = rng.randrange(slots), rng.choice([1, 2, 3, 5, rng.randrange(1, 64), rng.randrange(1, 500)])
        address = slot * SLOT_WORDS + rng.randrange(SLOT_WORDS - n + 1)
        commit = rng.random() < 0.75
        dropped += not commit
        await store.packet(address, [rng.getrandbits(32) for _ in range(n)], rng.choice([1, 3, 7, 15]), commit)
        if round_ % 3 == 0:
            # Around the packet just written (a read must see it), or anywhere.
            at = max(0, address - rng.randrange(4)) if rng.random() < 0.6 else rng.randrange(slots * SLOT_WORDS - 700)
            count = rng.choice([1, 4, rng.randrange(1, 700)])
            count = min(count, slots * SLOT_WORDS - at)
            await store.seek(at)
            if rng.random() < 0.3:  # abandoned part-way: the next seek must not see its words
                await with_timeout(store.take(rng.randrange(1, 8), 0.3), 1, "ms")
                at = rng.randrange(slots * SLOT_WORDS - count)
                await ClockCycles(dut.clk, rng.randrange(3))
                await store.seek(at)
            got = await with_timeout(store.take(count, rng.choice([0.0, 0.5])), 2, "ms")
            known += store.check(at, got, f"round {round_}, {count} words from {at:#x}")
    dut._log.info("%d bytes checked, %d packets dropped, %d refreshes", known, dropped, refreshes[0])
