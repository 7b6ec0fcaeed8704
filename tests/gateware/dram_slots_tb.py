"""DramSlots (gateware/dram_slots.py) against LiteDRAM's model: runs of engine words at
any phase within a DRAM word, with a partial last word, written to inbound lines and
committed, then fetched back into outbound lines, overlapping earlier runs; each fetch
is queued right behind its round's commits and must see them. Windows far apart in the
region take turns, so rows open and close (bank conflicts) while refreshes run."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge, with_timeout
from dram_harness import SLOT_LINE_WORDS, SLOT_LINES, SLOT_REGION_WORDS, SlotsHarness
from dram_tb import count_refreshes

from netblt.sim.rtl.beats import BeatSource
from netblt.sim.rtl.testbench import DRAM, start

DESCRIPTION = DRAM
WINDOW_WORDS = 1024
WINDOWS = [0, SLOT_REGION_WORDS // 4 + 4096, SLOT_REGION_WORDS // 2 + 8, SLOT_REGION_WORDS - WINDOW_WORDS]
"""Engine-word starts of the test's windows: far apart, so turns between them change rows."""


class Store:
    """Drives the harness's engine side and keeps the bytes DRAM should hold."""

    def __init__(self, dut, rng: random.Random) -> None:
        self.dut, self.rng = dut, rng
        layout = SlotsHarness(DESCRIPTION).slots.commit.payload.shape()  # the component's own layout
        self.commits = BeatSource(dut, "commit", layout, idle=0.3, rng=rng)
        self.fetches = BeatSource(dut, "fetch", layout, idle=0.3, rng=rng)
        self.ratio = DESCRIPTION["data_bits"] // 32
        self.model: dict[int, int] = {}  # byte of the region -> value
        self.done = {"committed": [0] * SLOT_LINES, "fetched": [0] * SLOT_LINES}
        dut.write__en.value = 0
        dut.read__en.value = 0

    async def watch(self) -> None:
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            for name, counts in self.done.items():
                bits = int(getattr(self.dut, name).value)
                for line in range(SLOT_LINES):
                    counts[line] += bits >> line & 1

    async def wait(self, name: str, line: int, count: int) -> None:
        while self.done[name][line] < count:
            await RisingEdge(self.dut.clk)

    async def stage(self, line: int, address: int, words: list[int], keep: int) -> None:
        """The run into an inbound line at its phase, with gaps; the model learns it."""
        phase = address % self.ratio
        for i, word in enumerate(words):
            while self.rng.random() < 0.2:
                self.dut.write__en.value = 0
                await RisingEdge(self.dut.clk)
            mask = keep if i == len(words) - 1 else 0xF
            self.dut.write__addr.value = line * SLOT_LINE_WORDS + phase + i
            self.dut.write__data.value, self.dut.write__en.value = word, mask
            await RisingEdge(self.dut.clk)
            for byte in range(4):
                if mask >> byte & 1:
                    self.model[4 * (address + i) + byte] = word >> 8 * byte & 0xFF
        self.dut.write__en.value = 0

    async def unstage(self, line: int, address: int, count: int) -> list[int]:
        """An outbound line's run, read in shuffled order."""
        phase = address % self.ratio
        got = [0] * count
        order = list(range(count))
        self.rng.shuffle(order)
        self.dut.read__en.value = 1
        for i in order:
            self.dut.read__addr.value = line * SLOT_LINE_WORDS + phase + i
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            got[i] = int(self.dut.read__data.value)
            await RisingEdge(self.dut.clk)
        return got

    def expected(self, address: int, count: int) -> list[int | None]:
        """The model's words; None where a byte was never written."""
        out = []
        for i in range(count):
            chunk = [self.model.get(4 * (address + i) + byte) for byte in range(4)]
            out.append(None if None in chunk else int.from_bytes(bytes(chunk), "little"))
        return out

    def run(self, window: int) -> tuple[int, int]:
        """A run's address and length inside a window: mostly short, sometimes a whole line."""
        phase_room = SLOT_LINE_WORDS - self.ratio + 1
        length = self.rng.choice([1, 2, 3, 4, 5, self.rng.randrange(1, 65), self.rng.randrange(1, phase_room)])
        address = WINDOWS[window] + self.rng.randrange(WINDOW_WORDS - length + 1)
        return address, length


@cocotb.test()
async def test_runs_at_any_phase_round_trip_in_order(dut):
    await start(dut)
    rng = random.Random(17)
    store = Store(dut, rng)
    refreshes = [0]
    cocotb.start_soon(store.watch())
    cocotb.start_soon(count_refreshes(dut, dut.dram.core, refreshes))

    # Every window filled with whole lines first, so every later fetch is fully known.
    for window in range(len(WINDOWS)):
        for start_word in range(0, WINDOW_WORDS, SLOT_LINE_WORDS):
            address = WINDOWS[window] + start_word
            await store.stage(0, address, [rng.getrandbits(32) for _ in range(SLOT_LINE_WORDS)], 0xF)
            before = store.done["committed"][0]
            await store.commits.send([{"line": 0, "address": address, "words": SLOT_LINE_WORDS, "keep": 0xF}])
            await with_timeout(store.wait("committed", 0, before + 1), 1, "ms")

    checked = 0
    for round_ in range(150):
        runs = [store.run(rng.randrange(len(WINDOWS))) for _ in range(SLOT_LINES)]
        keeps = [rng.choice([0x1, 0x3, 0x7, 0xF]) for _ in runs]
        for line, ((address, length), keep) in enumerate(zip(runs, keeps)):
            await store.stage(line, address, [rng.getrandbits(32) for _ in range(length)], keep)
        committed = list(store.done["committed"])
        await store.commits.send([{"line": line, "address": address, "words": length, "keep": keep}
                                  for line, ((address, length), keep) in enumerate(zip(runs, keeps))])
        # Fetches queued behind the commits: the runs, and stretches around them.
        fetches = []
        for line, (address, length) in enumerate(runs):
            if rng.random() < 0.5:
                address, length = max(WINDOWS[0], address - rng.randrange(8)), min(length + 16, SLOT_LINE_WORDS - 3)
            fetches.append((address, length))
        fetched = list(store.done["fetched"])
        await store.fetches.send([{"line": line, "address": address, "words": length}
                                  for line, (address, length) in enumerate(fetches)])
        for line, (address, length) in enumerate(fetches):
            await with_timeout(store.wait("fetched", line, fetched[line] + 1), 1, "ms")
            got = await store.unstage(line, address, length)
            want = store.expected(address, length)
            wrong = [i for i, (g, w) in enumerate(zip(got, want)) if w is not None and g != w]
            assert not wrong, (f"round {round_}: {len(wrong)} of {length} words at {address:#x} differ, "
                               f"first at +{wrong[0]}: {got[wrong[0]]:#010x}, not {want[wrong[0]]:#010x}")
            checked += sum(w is not None for w in want)
        for line in range(SLOT_LINES):
            assert store.done["committed"][line] == committed[line] + 1, "each commit reports its own line once"
    dut._log.info("%d words checked, %d refreshes", checked, refreshes[0])
