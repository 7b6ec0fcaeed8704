"""cocotb side of the gateware benchmark (bench/gateware_bench.py runs it; results as JSON).

Each benchmark measures in clock cycles, which the simulator counts exactly; nothing
here depends on how fast the host machine is.
"""

from __future__ import annotations

import math
import os
import statistics

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from ..formats import host_link as F
from ..formats.registers import PacingMode
from ..formats.rfc998 import DATA_HEADER_SIZE
from ..gateware.parser import RX_SETTINGS
from ..formats.pattern import pattern_bytes
from ..gateware.pattern import PATTERN_COMMAND
from ..gateware.reassembly import RX_COMMAND
from ..gateware.segmenter import TX_COMMAND, TX_SETTINGS
from ..gateware.streams import ip_payload
from ..gateware.transmit_path import PACING
from ..hw.litedram_ports import COUNT_BITS
from ..protocol import codec, packets
from ..sim.rtl.beats import BeatSource, pack, take, to_beats
from ..sim.rtl.testbench import CLOCK_PS, CONFIG, DRAM, dram_commands, record, start
from .wire import GIGABIT_NS_PER_BYTE, IPV4_HEADER, wire_bytes, wire_cycles

W = CONFIG.beat_bytes
LINK_UPLOAD_BPS = 32 * F.max_words(1500) / (wire_bytes(1500 - IPV4_HEADER) * GIGABIT_NS_PER_BYTE) * 1e9
"""The host link's upload data rate at a 1500-byte MTU (946.7 Mb/s: 1456 data bytes a
1538-byte frame)."""
SIZES = [int(s) for s in os.environ.get("NETBLT_BENCH_SIZES", "4,64,256,576,1024,1448,1472,8192").split(",")]
BURSTS = int(os.environ.get("NETBLT_BENCH_BURSTS", "1000"))


def cycle_now() -> int:
    return int(get_sim_time(unit="ps")) // CLOCK_PS


class Starts:
    """Takes a stream's packets and notes the cycle each one's first beat leaves: always
    ready, or with ``spacing``, a packet no sooner than that many cycles after the one
    before (a wire's pace)."""

    def __init__(self, dut, name: str, spacing: int = 0) -> None:
        self.clk, self.spacing = dut.clk, spacing
        self.valid = getattr(dut, f"{name}__valid")
        self.payload = getattr(dut, f"{name}__payload")
        self.ready = getattr(dut, f"{name}__ready")
        self.ready.value = 1
        self.last_bit = ip_payload(CONFIG.data_width)["last"].offset
        self.starts: list[int] = []

    async def run(self) -> None:
        cycle, inside, due = 0, False, 0
        while True:
            ready = inside or cycle >= due
            self.ready.value = int(ready)
            await ReadOnly()
            if self.valid.value and ready:
                if not inside:
                    self.starts.append(cycle)
                    due = cycle + self.spacing
                inside = not (int(self.payload.value) >> self.last_bit & 1)
            await RisingEdge(self.clk)
            cycle += 1


class DramCommands:
    """The commands the top's DRAM controller issued from now until :meth:`since`, by
    kind, with the nanoseconds between (None without DRAM)."""

    def __init__(self, dut) -> None:
        self.dut, self.begin, self.ns = dut, dram_commands(dut) if DRAM else {}, get_sim_time(unit="ns")

    def since(self) -> dict[str, int] | None:
        if not DRAM:
            return None
        end = dram_commands(self.dut)
        return {kind: (end[kind] - self.begin[kind]) % (1 << COUNT_BITS) for kind in end} | {
            "ns": get_sim_time(unit="ns") - self.ns}


async def transmitter_setup(dut, packet_size: int, data_checksum: int = 0):
    await start(dut)
    dut.settings.value = pack(TX_SETTINGS, {"packet_size": packet_size, "local_port": 1, "peer_port": 2,
                                            "data_checksum": data_checksum})
    dut.upload__en.value = 0
    dut.pacing.value = pack(PACING, {"mode": PacingMode.OFF})
    commands = BeatSource(dut, "command", TX_COMMAND)
    fills = BeatSource(dut, "fill", PATTERN_COMMAND)
    return commands, fills


async def fill(dut, fills: BeatSource, slot: int, buffer: int, length: int) -> None:
    await fills.send([{"slot": slot, "buffer": buffer, "length": length}])
    while True:
        await RisingEdge(dut.clk)
        if dut.filled.value:
            return


@cocotb.test()
async def bench_transmit_rate(dut):
    """Unpaced: cycles from one packet's start to the next, per payload size, without and
    with data checksums."""
    rows = []
    for size in SIZES:
        row = {"payload": size}
        for key, data_checksum in (("cycles", 0), ("cycles_checksum", 1)):
            commands, fills = await transmitter_setup(dut, size, data_checksum)
            count = min(CONFIG.max_packets, CONFIG.slot_bytes // size, 200)
            await fill(dut, fills, 0, 1, count * size)
            starts = Starts(dut, "out")
            task = cocotb.start_soon(starts.run())
            await commands.send([{"slot": 0, "buffer": 1, "length": count * size}])
            while len(starts.starts) < count:
                await RisingEdge(dut.clk)
            await ClockCycles(dut.clk, 4)
            task.cancel()
            gaps = [b - a for a, b in zip(starts.starts, starts.starts[1:])]
            row.update(packets=count, **{key: statistics.median(gaps)})
        rows.append(row)
    record("transmit", rows)


@cocotb.test()
async def bench_send_while_uploading(dut):
    """A sending board's whole load: one slot's 1448-byte DATA out at the wire's pace
    while the other slot is uploaded at the host link's rate; packet gaps, upload words
    taken and the DRAM's commands while both run."""
    size = 1448
    commands, fills = await transmitter_setup(dut, size)
    count = CONFIG.slot_bytes // size
    await fill(dut, fills, 0, 1, count * size)
    starts = Starts(dut, "out", spacing=math.ceil(wire_cycles(DATA_HEADER_SIZE + size, CONFIG.clock_hz)))
    watcher = cocotb.start_soon(starts.run())
    uploaded = 0

    async def upload():
        nonlocal uploaded
        begin, per_cycle = cycle_now(), LINK_UPLOAD_BPS / (CONFIG.data_width * CONFIG.clock_hz)
        for word in range(CONFIG.slot_words):
            while cycle_now() < begin + word / per_cycle or int(dut.upload_room.value) <= 1:
                dut.upload__en.value = 0
                await RisingEdge(dut.clk)
            dut.upload__addr.value, dut.upload__data.value, dut.upload__en.value = CONFIG.slot_words + word, word, 1
            await RisingEdge(dut.clk)
            uploaded += 1
        dut.upload__en.value = 0

    uploader = cocotb.start_soon(upload())
    dram, begin = DramCommands(dut), cycle_now()
    await commands.send([{"slot": 0, "buffer": 1, "length": count * size}])
    while len(starts.starts) < count:
        await RisingEdge(dut.clk)
    row = {"payload": size, "packets": count, "cycles": cycle_now() - begin, "uploaded": uploaded,
           "dram": dram.since()}
    await uploader
    watcher.cancel()
    gaps = [b - a for a, b in zip(starts.starts, starts.starts[1:])]
    record("send_while_uploading", row | {"gap": statistics.median(gaps)})


@cocotb.test()
async def bench_pacing(dut):
    """Paced: every burst start against its schedule, and the rate achieved, per mode."""
    size, burst, interval = 1024, 4, 2003  # 500.75 cycles a packet when smoothed
    out = {}
    for mode in (PacingMode.BURSTS, PacingMode.SMOOTH):
        commands, fills = await transmitter_setup(dut, size)
        # Hold the pacer (bursts of zero) until both slots are queued, so the clock starts clean.
        dut.pacing.value = pack(PACING, {"mode": PacingMode.BURSTS, "burst_size": 0, "interval": 10})
        per_buffer = CONFIG.slot_bytes // size
        for slot in range(CONFIG.tx_slots):
            await fill(dut, fills, slot, slot + 1, CONFIG.slot_bytes)
        starts = Starts(dut, "out")
        task = cocotb.start_soon(starts.run())
        next_buffer = 1

        async def keep_loaded():
            nonlocal next_buffer
            for slot in range(CONFIG.tx_slots):
                await commands.send([{"slot": slot, "buffer": next_buffer, "length": CONFIG.slot_bytes}])
                next_buffer += 1
            while True:
                await RisingEdge(dut.clk)
                if dut.sent.value:
                    slot = int(dut.sent_slot.value)
                    await commands.send([{"slot": slot, "buffer": next_buffer,
                                          "length": CONFIG.slot_bytes}])
                    next_buffer += 1

        feeder = cocotb.start_soon(keep_loaded())
        await ClockCycles(dut.clk, 200)  # both slots loaded before the clock starts
        dut.pacing.value = pack(PACING, {"mode": mode, "burst_size": burst, "interval": interval})
        wanted = BURSTS * burst + 1
        while len(starts.starts) < wanted:
            await RisingEdge(dut.clk)
        task.cancel()
        feeder.cancel()
        s = starts.starts[:wanted]
        firsts = s[0:-1:burst]
        deviation = max(abs(first - (s[0] + k * interval)) for k, first in enumerate(firsts))
        spread = None  # smooth mode: each packet against its share of the interval
        if mode == PacingMode.SMOOTH:
            spread = max(abs(start - (s[0] + j * interval / burst)) for j, start in enumerate(s))
        elapsed = s[-1] - s[0]
        achieved = (len(s) - 1) * size / elapsed
        programmed = burst * size / interval
        gaps = sorted({b - a for a, b in zip(s, s[1:])})
        out[mode.name] = {"bursts": len(firsts), "packets": len(s) - 1, "deviation": deviation,
                          "spread": spread, "rate_error": achieved / programmed - 1,
                          "gaps": [gaps[0], gaps[-1]],
                          "burst_size": burst, "interval": interval, "payload": size,
                          "buffers": next_buffer - 1, "per_buffer": per_buffer}
    record("pacing", out)


@cocotb.test()
async def bench_receive(dut):
    """Back-to-back DATA at the wire's spacing and with no gap at all: drops and cycles."""
    rows = []
    for size in SIZES:
        for spacing in ("wire", "none"):
            await start(dut)
            dut.settings.value = pack(RX_SETTINGS, {"local_port": 2, "peer_port": 1, "peer_address": 7})
            dut.packet_size.value = size
            dut.status_slot.value = 0
            await BeatSource(dut, "command", RX_COMMAND).send([{"post": 1, "slot": 0, "buffer": 1}])
            await ClockCycles(dut.clk, CONFIG.bitmap_words + 4)
            count = min(CONFIG.max_packets, CONFIG.slot_bytes // size, 200)
            data = pattern_bytes(1, count * size)
            frames = [codec.encode(packets.Data(1, n, 0, data[n * size:(n + 1) * size], n == count - 1),
                                   1, 2) for n in range(count)]
            accepted, drops = [], 0

            async def watch():
                nonlocal drops
                cycle = 0
                while True:
                    await ReadOnly()
                    if dut.accepted.value:
                        accepted.append(cycle)
                    drops += bin(int(dut.drops.value)).count("1")
                    await RisingEdge(dut.clk)
                    cycle += 1

            watcher = cocotb.start_soon(watch())
            source = BeatSource(dut, "input", ip_payload(CONFIG.data_width))
            begin = cycle_now()
            for n, raw in enumerate(frames):
                if spacing == "wire":  # packet n starts when the wire would deliver it
                    due = begin + round(n * wire_cycles(len(raw), CONFIG.clock_hz))
                    while cycle_now() < due:
                        await RisingEdge(dut.clk)
                await source.send(to_beats(raw, W, address=7, protocol=30, length=len(raw)))
            await ClockCycles(dut.clk, 50)
            watcher.cancel()
            gaps = [b - a for a, b in zip(accepted, accepted[1:])]
            rows.append({"payload": size, "spacing": spacing, "packets": count,
                         "accepted": len(accepted), "drops": drops,
                         "cycles": statistics.median(gaps) if gaps else None})
    record("receive", rows)


@cocotb.test()
async def bench_download(dut):
    """Downloads from the receive store: words per cycle from a seek, alone and while
    1448-byte DATA arrives into the other slot at the wire's spacing."""
    rows = []
    for busy in (False, True):
        await start(dut)
        dut.settings.value = pack(RX_SETTINGS, {"local_port": 2, "peer_port": 1, "peer_address": 7})
        dut.packet_size.value = size = 1448
        await BeatSource(dut, "command", RX_COMMAND).send([{"post": 1, "slot": 1, "buffer": 1}])
        await ClockCycles(dut.clk, CONFIG.bitmap_words + 4)
        count = CONFIG.slot_bytes // size
        data = pattern_bytes(1, count * size)
        frames = [codec.encode(packets.Data(1, n, 0, data[n * size:(n + 1) * size], n == count - 1), 1, 2)
                  for n in range(count)]
        accepted = []

        async def arrive():
            source, begin = BeatSource(dut, "input", ip_payload(CONFIG.data_width)), cycle_now()
            for n, raw in enumerate(frames):
                due = begin + round(n * wire_cycles(len(raw), CONFIG.clock_hz))
                while cycle_now() < due:
                    await RisingEdge(dut.clk)
                await source.send(to_beats(raw, W, address=7, protocol=30, length=len(raw)))

        async def watch():
            while True:
                await ReadOnly()
                if dut.accepted.value:
                    accepted.append(cycle_now())
                await RisingEdge(dut.clk)

        watcher = cocotb.start_soon(watch())
        arrival = cocotb.start_soon(arrive()) if busy else None
        words = CONFIG.slot_words  # all of slot 0
        dut.download_seek__valid.value, dut.download_seek__payload.value = 1, 0
        await RisingEdge(dut.clk)
        dut.download_seek__valid.value = 0
        dram, begin = DramCommands(dut), cycle_now()
        got = await take(dut, "download", words)
        cycles, commands = cycle_now() - begin, dram.since()
        if arrival:
            await arrival
            await ClockCycles(dut.clk, 2000)
        watcher.cancel()
        rows.append({"while": f"{count} DATA of {size} B arriving" if busy else "nothing else",
                     "words": len(got), "cycles": cycles, "accepted": len(accepted),
                     "packets": count if busy else 0, "dram": commands})
    record("download", rows)
