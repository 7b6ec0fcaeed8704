"""The transmit stores (gateware/transmit_store.py), block RAM and DRAM, driven alike:
runs of writes at any word, with gaps and jumps, each fetched back at once (a fetch
sees every write taken before it) at any word and length; then fetches from two slots
while uploads stream into the other two, as the segmenter and the host work at once;
then one run read while the next is fetched into the other, as the segmenter sends one
packet while it makes the next ready. Every word read is compared with a model of the
store.

NETBLT_TB_DRAM_DESCRIPTION is the DRAM core's description, or ``null`` for block RAM."""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import Combine, ReadOnly, RisingEdge, with_timeout
from dram_harness import TX_STORE_CONFIG
from dram_tb import count_refreshes

from netblt.gateware.config import LINE_WORDS
from netblt.sim.rtl.testbench import DRAM, start

SLOT_WORDS = TX_STORE_CONFIG.slot_words
WORDS = TX_STORE_CONFIG.tx_slots * SLOT_WORDS
ADDRESS_BITS = TX_STORE_CONFIG.tx_address_width
"""A write's and a fetch's address: the first field of their payloads."""
LONGEST = LINE_WORDS - (DRAM["data_bits"] // 32 - 1) if DRAM else SLOT_WORDS
"""The longest run the store fetches (its ``packet_words``)."""
RUN_AT = ADDRESS_BITS + LONGEST.bit_length()
"""Where a fetch's run number starts in its payload."""
INDEX_BITS = (LONGEST - 1).bit_length()
"""A read address's index in the run; the run number is above it."""


class Store:
    def __init__(self, dut, rng: random.Random) -> None:
        self.dut, self.rng = dut, rng
        self.model: list[int | None] = [None] * WORDS  # a word never written may hold anything (DRAM does)
        self.arrivals = [0, 0]
        dut.write__valid.value = dut.fetch__valid.value = 0
        dut.read__en.value = 1

    async def write(self, address: int, words: list[int], idle: float) -> None:
        """Each word in turn, once the store takes it, with idle cycles between."""
        dut = self.dut
        for i, word in enumerate(words):
            while self.rng.random() < idle:
                dut.write__valid.value = 0
                await RisingEdge(dut.clk)
            dut.write__valid.value, dut.write__payload.value = 1, word << ADDRESS_BITS | address + i
            await taken(dut, "write")
            self.model[address + i] = word
        dut.write__valid.value = 0

    async def watch(self) -> None:
        """Counts each run's ``fetched`` pulses."""
        while True:
            await RisingEdge(self.dut.clk)
            await ReadOnly()
            bits = int(self.dut.fetched.value)
            for run in range(2):
                self.arrivals[run] += bits >> run & 1

    async def arrival(self, run: int, seen: int) -> None:
        """Returns once ``run`` has had more than ``seen`` fetches come."""
        while self.arrivals[run] == seen:
            await RisingEdge(self.dut.clk)

    async def request(self, address: int, words: int, run: int) -> None:
        """Asks for the run; returns once the store has taken the fetch."""
        dut = self.dut
        dut.fetch__valid.value, dut.fetch__payload.value = 1, run << RUN_AT | words << ADDRESS_BITS | address
        await taken(dut, "fetch")
        dut.fetch__valid.value = 0

    async def fetch(self, address: int, words: int, run: int = 0) -> list[int]:
        """The run, fetched and then read by its index a word a cycle, from the cycle
        ``fetched`` pulses (the segmenter reads it then)."""
        dut = self.dut
        await self.request(address, words, run)
        dut.read__addr.value = run << INDEX_BITS
        await ReadOnly()
        while not int(dut.fetched.value) >> run & 1:
            await RisingEdge(dut.clk)
            await ReadOnly()
        return await self.read(words, run)

    async def read(self, words: int, run: int) -> list[int]:
        """The run's words, its first word's address held through the cycle before."""
        dut = self.dut
        got = []
        for i in range(words):
            await RisingEdge(dut.clk)  # word i's address was held through the last cycle
            dut.read__addr.value = run << INDEX_BITS | (i + 1 if i + 1 < words else 0)
            await ReadOnly()
            got.append(int(dut.read__data.value))
        await RisingEdge(dut.clk)
        return got

    def check(self, address: int, got: list[int], what: str) -> None:
        want = self.model[address:address + len(got)]
        wrong = [i for i, (a, b) in enumerate(zip(got, want)) if b is not None and a != b]
        assert not wrong, (f"{what}: {len(wrong)} of {len(got)} words differ, the first at {address + wrong[0]:#x}: "
                           f"{got[wrong[0]]:#010x}, not {want[wrong[0]]:#010x}")


async def taken(dut, name: str) -> None:
    """Returns after the cycle in which stream ``name``'s offered payload was taken."""
    while True:
        await ReadOnly()
        ready = bool(getattr(dut, f"{name}__ready").value)
        await RisingEdge(dut.clk)
        if ready:
            return


def run_length(rng: random.Random) -> int:
    return rng.choice([1, 2, 3, 5, rng.randrange(1, 64), rng.randrange(1, LONGEST + 1), LONGEST])


@cocotb.test()
async def test_writes_then_fetches(dut):
    await start(dut)
    rng = random.Random(31)
    store = Store(dut, rng)
    refreshes = [0]
    if DRAM:
        cocotb.start_soon(count_refreshes(dut, dut.dram.core, refreshes))
    for round_ in range(120):
        n = rng.choice([1, 2, 3, 5, rng.randrange(1, 64), rng.randrange(1, 1500)])
        address = rng.randrange(WORDS - n)
        await with_timeout(store.write(address, [rng.getrandbits(32) for _ in range(n)], rng.choice([0, 0.3])),
                           2, "ms")
        if rng.random() < 0.3:  # a jump: a second run straight after, elsewhere
            m = rng.randrange(1, 200)
            other = rng.randrange(WORDS - m)
            await with_timeout(store.write(other, [rng.getrandbits(32) for _ in range(m)], 0), 1, "ms")
        # At once, around the run just written (a fetch must see it), or anywhere.
        words = run_length(rng)
        at = max(0, min(address - rng.randrange(4), WORDS - words)) if rng.random() < 0.7 \
            else rng.randrange(WORDS - words + 1)
        got = await with_timeout(store.fetch(at, words), 1, "ms")
        store.check(at, got, f"round {round_}: {words} words from {at:#x}")
    dut._log.info("%d refreshes", refreshes[0])


@cocotb.test()
async def test_fetches_while_uploads_stream(dut):
    """Slots 2 and 3 are fetched while slots 0 and 1 are written: fetches are never lost
    behind the writes, and the writes go on between them."""
    await start(dut)
    rng = random.Random(37)
    store = Store(dut, rng)
    half = WORDS // 2
    # Every word known first (the memories keep the last test's).
    await with_timeout(store.write(0, [rng.getrandbits(32) for _ in range(WORDS)], 0), 5, "ms")
    uploading = [True]

    async def upload() -> None:
        while uploading[0]:
            n = rng.randrange(1, 700)
            await store.write(rng.randrange(half - n), [rng.getrandbits(32) for _ in range(n)], 0.1)

    writer = cocotb.start_soon(upload())
    for round_ in range(60):
        words = run_length(rng)
        at = half + rng.randrange(half - words + 1)
        got = await with_timeout(store.fetch(at, words), 1, "ms")
        store.check(at, got, f"round {round_}: {words} words from {at:#x} while uploading")
    uploading[0] = False
    await with_timeout(writer, 1, "ms")
    # What the uploads wrote, read back after them.
    for at in range(0, half, LONGEST):
        words = min(LONGEST, half - at)
        store.check(at, await with_timeout(store.fetch(at, words), 1, "ms"), f"uploaded words from {at:#x}")


@cocotb.test()
async def test_a_run_is_read_while_the_next_is_fetched(dut):
    """Each round reads one run while the next is fetched into the other run (neither
    disturbs the other), then waits for that fetch and reads it in the next round."""
    await start(dut)
    rng = random.Random(41)
    store = Store(dut, rng)
    cocotb.start_soon(store.watch())
    await with_timeout(store.write(0, [rng.getrandbits(32) for _ in range(WORDS)], 0), 5, "ms")

    def pick() -> tuple[int, int]:
        words = run_length(rng)
        return rng.randrange(WORDS - words + 1), words

    at, words = pick()
    run = 0
    got = await with_timeout(store.fetch(at, words, run), 1, "ms")
    for round_ in range(60):
        store.check(at, got, f"round {round_}: {words} words from {at:#x} in run {run}")
        read_at, read_words, read_run = at, rng.randrange(1, words + 1), run
        at, words = pick()
        run = 1 - run
        seen = store.arrivals[run]
        dut.read__addr.value = read_run << INDEX_BITS
        reading = cocotb.start_soon(store.read(read_words, read_run))
        await with_timeout(Combine(cocotb.start_soon(store.request(at, words, run)), reading), 1, "ms")
        store.check(read_at, reading.result(), f"round {round_}: run {read_run} read again while run {run} was fetched")
        await with_timeout(store.arrival(run, seen), 1, "ms")
        dut.read__addr.value = run << INDEX_BITS
        got = await store.read(words, run)
