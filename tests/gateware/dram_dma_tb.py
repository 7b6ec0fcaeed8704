"""DramDma (gateware/dram_dma.py) against LiteDRAM's model: runs of 1 to 256 words copied
from staging to DRAM and back to another place in staging, byte-exact, each pair of
copies queued back to back with random gaps before them, refreshes counted in the log."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge, with_timeout
from dram_harness import STAGING_WORDS, DmaHarness
from dram_tb import count_refreshes

from netblt.sim.beats import Source
from netblt.sim.testbench import DRAM, start

DESCRIPTION = DRAM


async def load(dut, address: int, words: list[int]) -> None:
    for offset, word in enumerate(words):
        dut.load__addr.value, dut.load__data.value, dut.load__en.value = address + offset, word, 1
        await RisingEdge(dut.clk)
    dut.load__en.value = 0


async def unload(dut, address: int, count: int) -> list[int]:
    out = []
    dut.unload__en.value = 1
    for offset in range(count):
        dut.unload__addr.value = address + offset
        await RisingEdge(dut.clk)
        await ReadOnly()
        out.append(int(dut.unload__data.value))
        await RisingEdge(dut.clk)
    return out


async def count_done(dut, done: list[int]) -> None:
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        done[0] += int(dut.done.value)


async def copied(dut, done: list[int], count: int) -> None:
    while done[0] < count:
        await RisingEdge(dut.clk)


@cocotb.test()
async def test_runs_round_trip_through_dram(dut):
    dut.load__en.value = 0
    dut.unload__en.value = 0
    await start(dut)
    rng = random.Random(5)
    width, bits = DESCRIPTION["data_bits"], DESCRIPTION["address_bits"]
    copy_layout = DmaHarness(DESCRIPTION).dma.copy.payload.shape()  # the component's own layout
    copies = Source(dut, "copy", copy_layout, idle=0.5, rng=rng)
    done, refreshes = [0], [0]
    cocotb.start_soon(count_done(dut, done))
    cocotb.start_soon(count_refreshes(dut, dut.dram.core, refreshes))
    half = STAGING_WORDS // 2
    for length in [1, 2, 3, 4, 5, 7, 8, 31, 64, 255, half]:
        words = [rng.getrandbits(width) for _ in range(length)]
        await load(dut, 0, words)
        dram = rng.randrange((1 << bits) - length)
        before = done[0]
        whole = {"first_mask": (1 << width // 8) - 1, "last_mask": (1 << width // 8) - 1}
        await with_timeout(copies.send([{"to_dram": 1, "staging": 0, "dram": dram, "words": length, **whole},
                                        {"to_dram": 0, "staging": half, "dram": dram, "words": length}]), 1, "ms")
        await with_timeout(copied(dut, done, before + 2), 1, "ms")
        got = await unload(dut, half, length)
        assert got == words, f"{length} words through DRAM at {dram:#x}: {sum(g != w for g, w in zip(got, words))} differ"
    dut._log.info("%d refreshes during the copies", refreshes[0])
