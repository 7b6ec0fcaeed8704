"""LiteDRAM's generated core (hw/litedram_core.py) under Verilator: it initialises itself,
and its native ports, in the engine's clock domain across from the DRAM's, read back
exactly what was written, byte masks included, while refresh and row misses happen.

Runs against the model PHY with a board chip's geometry, described by the JSON the
core's generator wrote (NETBLT_TB_DRAM_DESCRIPTION)."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import RisingEdge, with_timeout

from netblt.gateware.dram_dma import NativePort
from netblt.sim.rtl.beats import BeatSink, BeatSource
from netblt.sim.rtl.testbench import DRAM, dram_commands, start

DESCRIPTION = DRAM


class Port:
    """One native port driven from cocotb through the testbench's stream helpers, with
    idle gaps on its commands and stalls on what it takes."""

    def __init__(self, dut, index: int, rng: random.Random) -> None:
        port = NativePort(DESCRIPTION["address_bits"], DESCRIPTION["data_bits"])
        name = f"ports__{index}"
        self.command = BeatSource(dut, f"{name}__cmd", port.command, idle=0.2, rng=rng)
        # LiteDRAM takes a write's data the cycle it issues the write, whether valid or not:
        # a user must hold the data ready before its command (NativePort), so no gaps here.
        self.data = BeatSource(dut, f"{name}__wdata", port.write, rng=rng)
        self.read_data = BeatSink(dut, f"{name}__rdata", None, stall=0.2, rng=rng)
        cocotb.start_soon(self.read_data.run())

    async def write(self, writes: list[tuple[int, int, int]]) -> None:
        """(address, data, byte mask) each: the data offered from the start, the commands
        alongside with gaps, so the port has taken each word's data before its command."""
        data = cocotb.start_soon(self.data.send({"data": word, "we": mask} for _, word, mask in writes))
        await self.command.send({"we": 1, "addr": address} for address, _, _ in writes)
        await data

    async def read(self, addresses: list[int]) -> list[int]:
        self.read_data.beats.clear()
        await self.command.send({"we": 0, "addr": address} for address in addresses)
        while len(self.read_data.beats) < len(addresses):
            await RisingEdge(self.command.clk)
        return [word for _, word in self.read_data.beats]


REFRESH_GRANT = ("litedram_core", "sdram_bankmachine0_refresh_gnt")
"""The signal inside LiteDRAM's core that count_refreshes reads (its build makes it visible)."""


async def count_refreshes(dut, core, counter: list[int]) -> None:
    """LiteDRAM's refresher takes bank machine 0 for each refresh: its grants in the
    ``litedram_core`` instance ``core``, counted."""
    grant = getattr(core, REFRESH_GRANT[1])
    previous = 0
    while True:
        await RisingEdge(dut.dram_clk)
        value = int(grant.value)
        counter[0] += value and not previous
        previous = value


def masked(old: int, new: int, mask: int, width: int) -> int:
    for byte in range(width // 8):
        if mask >> byte & 1:
            old = old & ~(0xFF << 8 * byte) | new & 0xFF << 8 * byte
    return old


@cocotb.test()
async def test_init_then_random_writes_read_back(dut):
    await start(dut)
    refreshes = [0]
    cocotb.start_soon(count_refreshes(dut, dut.core, refreshes))
    rng = random.Random(17)
    width, bits = DESCRIPTION["data_bits"], DESCRIPTION["address_bits"]
    memory: dict[int, int] = {}
    ports = [Port(dut, 0, rng), Port(dut, 1, rng)]
    before, issued = dram_commands(dut), {"write": 0, "read": 0}
    for round_ in range(6):
        # Runs of consecutive words (as slots are used) at addresses anywhere: a new row
        # in a busy bank often, so row misses and refreshes fall inside the runs.
        writes = []
        for _ in range(4):
            base = rng.randrange(1 << bits)
            for address in range(base, min(base + rng.randrange(1, 40), 1 << bits)):
                whole = (1 << width // 8) - 1  # a word's first write is whole: no reliance on the model's reset
                mask = rng.choice([whole, rng.getrandbits(width // 8)]) if address in memory else whole
                writes.append((address, rng.getrandbits(width), mask))
        port = ports[round_ % 2]
        await with_timeout(port.write(writes), 1, "ms")
        issued["write"] += len(writes)
        for address, word, mask in writes:
            memory[address] = masked(memory.get(address, 0), word, mask, width)
        # Read through the other port: what one store wrote, the other sees.
        addresses = sorted(memory)
        rng.shuffle(addresses)
        got = await with_timeout(ports[(round_ + 1) % 2].read(addresses), 1, "ms")
        issued["read"] += len(addresses)
        wrong = [hex(a) for a, g in zip(addresses, got) if g != memory[a]]
        assert not wrong, f"round {round_}: {len(wrong)} words differ, first at {wrong[:4]}"
    dut._log.info("%d words checked, %d refreshes during the run", len(memory), refreshes[0])
    assert refreshes[0] >= 2, "the run must span DRAM refreshes"
    # The command counters (the benchmark's DRAM figures): a native-port command is one
    # burst; each refresh one REFRESH, the last perhaps still to come after its grant.
    counted = {kind: count - before[kind] for kind, count in dram_commands(dut).items()}
    assert {kind: counted[kind] for kind in issued} == issued
    assert counted["refresh"] in (refreshes[0], refreshes[0] - 1), (counted, refreshes)
    assert counted["activate"] > 0 and counted["precharge"] > 0  # rows opened; closed for refreshes at least
