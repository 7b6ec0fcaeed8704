"""DramDma (gateware/dram_dma.py) against LiteDRAM's model: runs of 1 to 256 words copied
from staging to DRAM and back to another place in staging, byte-exact, each pair of
copies queued back to back with random gaps before them, refreshes counted in the log;
each read's sum of the bytes under its random end masks, as a data checksum adds them."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge, with_timeout
from dram_harness import STAGING_WORDS, DmaHarness
from dram_tb import count_refreshes

from netblt.sim.rtl.beats import BeatSource
from netblt.sim.rtl.testbench import DRAM, start

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


async def count_done(dut, done: list[int], sums: list[int] | None = None) -> None:
    """Counts ``done`` pulses, and keeps ``read_sum`` as each one shows it."""
    while True:
        await RisingEdge(dut.clk)
        await ReadOnly()
        if dut.done.value:
            done[0] += 1
            if sums is not None:
                sums.append(int(dut.read_sum.value))


def checksum_sum(words: list[int], width: int, first_mask: int, last_mask: int) -> int:
    """The ones'-complement sum, folded to 16 bits, of the words' bytes (lane 0 first)
    under the end masks, paired into big-endian halfwords as the Internet checksum is."""
    total = 0
    for index, word in enumerate(words):
        mask = (first_mask if index == 0 else -1) & (last_mask if index == len(words) - 1 else -1)
        data = [(word >> 8 * i) & 0xFF if mask >> i & 1 else 0 for i in range(width // 8)]
        total += sum(data[i] << 8 | data[i + 1] for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


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
    copies = BeatSource(dut, "copy", copy_layout, idle=0.5, rng=rng)
    done, refreshes, sums = [0], [0], []
    cocotb.start_soon(count_done(dut, done, sums))
    cocotb.start_soon(count_refreshes(dut, dut.dram.core, refreshes))
    half = STAGING_WORDS // 2
    for length in [1, 2, 3, 4, 5, 7, 8, 31, 64, 255, half]:
        words = [rng.getrandbits(width) for _ in range(length)]
        await load(dut, 0, words)
        dram = rng.randrange((1 << bits) - length)
        before = done[0]
        whole = {"first_mask": (1 << width // 8) - 1, "last_mask": (1 << width // 8) - 1}
        # A read's masks choose the bytes it sums, not those it stores.
        ends = {"first_mask": rng.getrandbits(width // 8), "last_mask": rng.getrandbits(width // 8)}
        await with_timeout(copies.send([{"to_dram": 1, "staging": 0, "dram": dram, "words": length, **whole},
                                        {"to_dram": 0, "staging": half, "dram": dram, "words": length, **ends}]),
                           1, "ms")
        await with_timeout(copied(dut, done, before + 2), 1, "ms")
        got = await unload(dut, half, length)
        assert got == words, f"{length} words through DRAM at {dram:#x}: {sum(g != w for g, w in zip(got, words))} differ"
        assert sums[-1] == checksum_sum(words, width, **ends), f"the sum of a {length}-word read"
    dut._log.info("%d refreshes during the copies", refreshes[0])
