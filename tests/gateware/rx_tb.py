"""cocotb tests of the receive side (gateware/receive_path.py) under Verilator."""

from __future__ import annotations

import random
from collections import Counter

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from netblt.gateware.config import LINE_WORDS
from netblt.formats.drops import Drop
from netblt.gateware.parser import RX_SETTINGS
from netblt.formats.pattern import pattern_bytes
from netblt.gateware.pattern import PATTERN_COMMAND
from netblt.gateware.reassembly import MISSING, MISSING_QUERY, RX_COMMAND, RX_EVENT, SLOT_STATUS
from netblt.gateware.streams import ip_payload
from netblt.gateware.packet_fifo import CONTROL_META
from netblt.protocol import codec, packets
from netblt.formats.checksum import internet_checksum
from netblt.formats import rfc998 as L
from netblt.gateware.sink_port import sink_word
from netblt.sim.rtl.beats import BeatSink, BeatSource, beat_bytes, take, to_beats, unpack
from netblt.sim.rtl.testbench import CONFIG, DRAM, apply, start

W = CONFIG.beat_bytes
LOCAL, PEER = 2998, 40001
PEER_ADDRESS = 0x0A000002
PACKET = 1024
FIELDS = {f.name: f for layout in (L.HEADER, L.DATA) for f in layout.fields}


class Rx:
    """The receiver with its streams attached, counting what it reports."""

    def __init__(self, dut, **settings) -> None:
        self.dut = dut
        self.input = BeatSource(dut, "input", ip_payload(CONFIG.data_width))
        self.commands = BeatSource(dut, "command", RX_COMMAND)
        self.queries = BeatSource(dut, "query", MISSING_QUERY)
        self.drains = BeatSource(dut, "drain", PATTERN_COMMAND)
        self.sink = BeatSink(dut, "sink", sink_word(CONFIG.data_width), stall=0.3)
        self.events = BeatSink(dut, "event", RX_EVENT)
        self.missing = BeatSink(dut, "missing", MISSING)
        self.control = BeatSink(dut, "control", None)
        self.meta = BeatSink(dut, "control_meta", CONTROL_META)
        self.settings = {"local_port": LOCAL, "peer_port": PEER, "peer_address": PEER_ADDRESS,
                         "udp_local_port": 2998, "udp_peer_port": 2999, **settings}
        apply(dut.settings, RX_SETTINGS, self.settings)
        dut.packet_size.value = PACKET
        dut.status_slot.value = 0
        self.counts: Counter[str] = Counter()
        self.accepted_at: list[int] = []
        """The cycle of each packet's acceptance, as the testbench saw it."""
        self.data_checksum = bool(settings.get("data_checksum"))

    @classmethod
    async def create(cls, dut, **settings) -> Rx:
        await start(dut)
        rx = cls(dut, **settings)
        for sink in (rx.events, rx.missing, rx.control, rx.meta, rx.sink):
            cocotb.start_soon(sink.run())
        cocotb.start_soon(rx.count())
        return rx

    async def count(self) -> None:
        cycle = 0
        while True:
            await ReadOnly()
            drops = int(self.dut.drops.value)
            for reason in Drop:
                if drops >> reason & 1:
                    self.counts[reason.name] += 1
            if self.dut.accepted.value:
                self.counts["accepted"] += 1
                self.accepted_at.append(cycle)
            self.counts["duplicate"] += int(self.dut.duplicate.value)
            self.counts["events_lost"] += int(self.dut.events_lost.value)
            await RisingEdge(self.dut.clk)
            cycle += 1

    async def post(self, slot: int, buffer: int) -> None:
        await self.commands.send([{"post": 1, "slot": slot, "buffer": buffer}])
        await ClockCycles(self.dut.clk, CONFIG.bitmap_words + 4)

    def data(self, buffer: int, number: int, length: int, *, last: bool = False,
             sender_port: int = PEER, to_port: int = LOCAL) -> bytes:
        """DATA (or the LDATA) packet ``number`` of a pattern buffer of ``length`` bytes."""
        body = pattern_bytes(buffer, length)[number * PACKET:(number + 1) * PACKET]
        ldata = (number + 1) * PACKET >= length
        return codec.encode(packets.Data(buffer, number, 0, body, ldata, last), sender_port, to_port,
                            data_checksum=self.data_checksum)

    async def feed(self, *datagrams: bytes, address: int = PEER_ADDRESS, protocol: int = L.IP_PROTOCOL) -> None:
        for raw in datagrams:
            await self.input.send(to_beats(raw, W, address=address, protocol=protocol, length=len(raw)))
        await ClockCycles(self.dut.clk, 8)

    async def query(self, slot: int, limit: int) -> list[int]:
        before = len(self.missing.beats)
        await self.queries.send([{"slot": slot, "limit": limit}])
        while not any(b["end"] for _, b in self.missing.beats[before:]):
            await RisingEdge(self.dut.clk)
        listed = [b for _, b in self.missing.beats[before:]]
        assert listed[-1]["packet"] == len(listed) - 1
        return [b["packet"] for b in listed[:-1]]

    async def drain(self, slot: int, buffer: int, length: int) -> tuple[int, bytes]:
        """DRAIN the slot through a sink that holds ready low a cycle in three: the pattern
        checker's count, and the bytes the sink took, each word marked with the buffer and
        the last one as the last."""
        before = len(self.sink.beats)
        await self.drains.send([{"slot": slot, "buffer": buffer, "length": length}])
        while True:
            await RisingEdge(self.dut.clk)
            if self.dut.drained.value:
                break
        words = [beat for _, beat in self.sink.beats[before:]]
        assert all(w["buffer"] == buffer for w in words) and [w["last"] for w in words] == [0] * (len(words) - 1) + [1]
        return int(self.dut.mismatches.value), beat_bytes(words, W)

    async def check(self, slot: int, buffer: int, length: int) -> int:
        """The checker's count of a DRAIN, whose bytes must be the slot's (as a download reads them)."""
        mismatches, drained = await self.drain(slot, buffer, length)
        assert drained == await self.download(slot, length)
        return mismatches

    async def status(self, slot: int) -> dict:
        self.dut.status_slot.value = slot
        await ReadOnly()
        value = unpack(SLOT_STATUS, int(self.dut.status.value))
        await RisingEdge(self.dut.clk)
        return value

    async def download(self, slot: int, length: int) -> bytes:
        """The slot's first ``length`` bytes through the store's reader: a seek, then words."""
        dut = self.dut
        dut.download_seek__valid.value, dut.download_seek__payload.value = 1, slot * CONFIG.slot_words
        await RisingEdge(dut.clk)
        dut.download_seek__valid.value = 0
        words = await take(dut, "download", -(-length // W))
        return b"".join(int(w).to_bytes(W, "little") for w in words)[:length]


def count_of(length: int) -> int:
    return -(-length // PACKET)


@cocotb.test()
async def test_impaired_arrival_ends_with_right_bitmaps_and_data(dut):
    """Loss, reordering, duplication and corruption: the bitmap lists exactly what is
    missing, the resent packets complete both buffers, and each slot holds its own data."""
    rng = random.Random(7)
    rx = await Rx.create(dut, data_checksum=1)
    sizes = {0: (5, 9 * PACKET + 100), 1: (6, 12 * PACKET)}
    for slot, (buffer, _) in sizes.items():
        await rx.post(slot, buffer)
    traffic, lost = [], {slot: set() for slot in sizes}
    for slot, (buffer, length) in sizes.items():
        for number in range(count_of(length)):
            raw = rx.data(buffer, number, length)
            if number != count_of(length) - 1 and rng.random() < 0.25:
                lost[slot].add(number)
                continue
            traffic.append(raw)
            if rng.random() < 0.2:
                traffic.append(raw)  # duplicate
            if rng.random() < 0.2:
                bad = bytearray(raw)
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
                traffic.append(bytes(bad))  # corrupted copy
    rng.shuffle(traffic)
    await rx.feed(*traffic)

    corrupted = sum(rx.counts[r] for r in ("CHECKSUM", "DATA_CHECKSUM", "LENGTH", "VERSION", "TYPE",
                                           "CONNECTION", "SHORT", "OUTSIDE", "UNPOSTED", "PAST_LDATA"))
    delivered = sum(count_of(length) for _, length in sizes.values()) - sum(map(len, lost.values()))
    assert rx.counts["accepted"] == delivered
    assert rx.counts["accepted"] + rx.counts["duplicate"] + corrupted == len(traffic)
    for slot, (buffer, length) in sizes.items():
        assert await rx.query(slot, count_of(length)) == sorted(lost[slot])
        status = await rx.status(slot)
        assert status["count_known"] and status["count"] == count_of(length)
        assert status["received"] == count_of(length) - len(lost[slot])

    await rx.feed(*(rx.data(sizes[s][0], n, sizes[s][1]) for s in sizes for n in sorted(lost[s])))
    for slot, (buffer, length) in sizes.items():
        assert await rx.query(slot, count_of(length)) == []
        assert (await rx.status(slot))["complete"]
        assert await rx.check(slot, buffer, length) == 0
        assert await rx.download(slot, length) == pattern_bytes(buffer, length)
    done = [b for _, b in rx.events.beats if b["complete"]]
    assert sorted(b["slot"] for b in done) == [0, 1]
    firsts = [b for _, b in rx.events.beats if b["first"]]
    assert sorted(b["slot"] for b in firsts) == [0, 1]


@cocotb.test()
async def test_every_slot_keeps_its_own_row(dut):
    """Every slot posted, in no order, and their packets interleaved with losses: each
    slot's row (status, missing list, completion) is its own buffer's. Then one slot
    released and posted again for another buffer: its row starts afresh, the others'
    stay."""
    rng = random.Random(5)
    rx = await Rx.create(dut)
    slots = rng.sample(range(CONFIG.rx_slots), CONFIG.rx_slots)
    buffers = {slot: 40 + 3 * slot for slot in slots}
    lengths = {slot: rng.randrange(1, 4) * PACKET + rng.choice((0, 200)) for slot in slots}
    for slot in slots:
        await rx.post(slot, buffers[slot])
    lost = {slot: {n for n in range(count_of(lengths[slot]) - 1) if rng.random() < 0.3} for slot in slots}
    traffic = [rx.data(buffers[s], n, lengths[s]) for s in slots for n in range(count_of(lengths[s]))
               if n not in lost[s]]
    rng.shuffle(traffic)
    await rx.feed(*traffic)
    assert rx.counts["accepted"] == len(traffic)
    for slot in slots:
        status = await rx.status(slot)
        count = count_of(lengths[slot])
        assert (status["buffer"], status["active"], status["count_known"], status["count"], status["received"],
                status["complete"]) == (buffers[slot], 1, 1, count, count - len(lost[slot]), not lost[slot])
        assert await rx.query(slot, count) == sorted(lost[slot])
    done = sorted(b["slot"] for _, b in rx.events.beats if b["complete"])
    assert done == sorted(s for s in slots if not lost[s])

    again = slots[0]
    await rx.commands.send([{"post": 0, "slot": again, "buffer": 0}])
    await rx.post(again, 999)
    status = await rx.status(again)
    assert (status["buffer"], status["active"], status["received"], status["count_known"]) == (999, 1, 0, 0)
    assert await rx.query(again, 3) == [0, 1, 2]
    await rx.feed(rx.data(buffers[again], 0, lengths[again]))  # its old buffer's: no longer posted
    assert rx.counts["UNPOSTED"] == 1
    for slot in slots[1:]:
        assert (await rx.status(slot))["received"] == count_of(lengths[slot]) - len(lost[slot])


@cocotb.test()
async def test_hostile_packets_are_counted_and_dropped(dut):
    """Every malformed or foreign packet is counted under its reason and changes nothing."""
    rx = await Rx.create(dut)
    length = 4 * PACKET
    await rx.post(0, 5)
    await rx.post(1, 6)
    good = rx.data(5, 1, length)

    def edited(**fields) -> bytes:
        """``good`` with header fields changed and its checksum made right again."""
        raw = bytearray(good)
        for name, value in fields.items():
            f = FIELDS[name]
            raw[f.offset:f.end] = value.to_bytes(f.width, "big")
        raw[0:2] = bytes(2)
        raw[0:2] = internet_checksum(raw[:L.DATA_HEADER_SIZE]).to_bytes(2, "big")
        return bytes(raw)

    short_data = codec.encode(packets.Data(5, 1, 0, bytes(PACKET - 4)), PEER, LOCAL)

    cases = [
        (good[:20], "SHORT"),
        (good + bytes(8), "LENGTH"),                      # oversized: more than padding
        (good[:-8], "LENGTH"),                            # truncated data area
        (bytes([good[0] ^ 0xFF]) + good[1:], "CHECKSUM"),
        (edited(version=1), "VERSION"),
        (edited(type=12), "TYPE"),
        (edited(local_port=999), "CONNECTION"),
        (edited(foreign_port=999), "CONNECTION"),
        (edited(buffer=77), "UNPOSTED"),
        (edited(packet=CONFIG.max_packets + 3), "OUTSIDE"),
        (edited(packet=CONFIG.slot_bytes // PACKET), "OUTSIDE"),     # past the slot's end
        (short_data, "LENGTH"),                           # only an LDATA may be short
    ]
    for raw, reason in cases:
        before = rx.counts[reason]
        await rx.feed(raw)
        assert rx.counts[reason] == before + 1, (reason, raw[:24].hex())
    await rx.feed(good, address=PEER_ADDRESS + 1)
    await rx.feed(good, protocol=17)
    assert rx.counts["CONNECTION"] == 4
    assert rx.counts["accepted"] == 0
    assert await rx.query(0, 4) == [0, 1, 2, 3]
    assert (await rx.status(1))["received"] == 0

    # LDATA fixes the count; packets past it, and a second LDATA elsewhere, are refused.
    await rx.feed(rx.data(5, 1, 2 * PACKET))
    await rx.feed(rx.data(5, 2, length), rx.data(5, 0, PACKET))
    assert rx.counts["PAST_LDATA"] == 2
    assert rx.counts["accepted"] == 1
    assert await rx.query(0, 4) == [0]


@cocotb.test()
async def test_a_packet_longer_than_the_store_takes_is_refused_whole(dut):
    """A store in DRAM takes a packet as long as a staging line: a longer one, even at the
    negotiated packet size, is a LENGTH drop that writes nothing; block RAM takes it."""
    rx = await Rx.create(dut)
    size = 2 * LINE_WORDS * 4  # two lines' worth
    dut.packet_size.value = size
    await rx.post(0, 7)
    body = bytes(range(256)) * (size // 256)
    before = await rx.download(0, 2 * size) if DRAM else b""  # DRAM starts with anything in it
    await rx.feed(codec.encode(packets.Data(7, 1, 0, body), PEER, LOCAL))
    if DRAM:
        assert (rx.counts["LENGTH"], rx.counts["accepted"]) == (1, 0)
        assert (await rx.status(0))["received"] == 0
        assert await rx.download(0, 2 * size) == before
    else:
        assert (rx.counts["LENGTH"], rx.counts["accepted"]) == (0, 1)
        assert (await rx.download(0, 2 * size))[size:] == body


@cocotb.test()
async def test_control_packets_reach_the_fifo_whole(dut):
    """Non-data packets go to the host intact; a corrupted one never appears."""
    rx = await Rx.create(dut)
    opening = codec.encode(packets.Open(
        uid=7, buffer_size=65536, packet_size=1024, burst_size=4, burst_interval=10, death_timer=30,
        max_buffers=2, data_checksum=False, write_mode=True, transfer_size=1 << 20,
        client_string=b"netblt-file/1"), PEER, LOCAL)
    control = codec.encode(packets.Control((packets.Go(1, 3), packets.Resend(2, 4, (1, 5, 9)))),
                           PEER, LOCAL)
    broken = bytearray(control)
    broken[-5] ^= 0x40
    await rx.feed(opening, bytes(broken), control)
    await ClockCycles(dut.clk, 50)  # a packet drains a word a cycle once it is whole
    assert rx.counts["CHECKSUM"] == 1
    words = [b for _, b in rx.control.beats]
    assert len(rx.meta.beats) == 2
    got = []  # as the host reads them: each packet's words, cut at its length
    for _, meta in rx.meta.beats:
        count = -(-meta["length"] // W)
        got.append(b"".join(w.to_bytes(W, "little") for w in words[:count])[:meta["length"]])
        words = words[count:]
    assert got == [opening, control] and not words
    assert [m for _, m in rx.meta.beats] == [
        {"length": len(opening), "address": PEER_ADDRESS, "port": 0},
        {"length": len(control), "address": PEER_ADDRESS, "port": 0}]


@cocotb.test()
async def test_back_to_back_packets_are_all_taken(dut):
    """Packets with no gap between them: none dropped, every one placed."""
    rx = await Rx.create(dut)
    length = 16 * PACKET
    await rx.post(0, 3)
    await rx.feed(*(rx.data(3, n, length) for n in range(16)))
    assert rx.counts["accepted"] == 16 and sum(rx.counts[d.name] for d in Drop) == 0
    assert await rx.check(0, 3, length) == 0
    assert await rx.download(0, length) == pattern_bytes(3, length)


@cocotb.test()
async def test_check_counts_exactly_the_beats_that_differ(dut):
    """CHECK is trusted by other tests, so it is tested itself: one byte changed in one beat
    counts one mismatch; another packet's data at a packet's place counts each of its beats;
    the wrong buffer's pattern counts every beat."""
    rx = await Rx.create(dut)  # no data checksum: a changed payload is accepted as data
    length = 4 * PACKET
    await rx.post(0, 3)
    pattern = pattern_bytes(3, length)
    changed = bytearray(pattern)
    changed[2 * PACKET + 100] ^= 0xFF
    await rx.feed(*(rx.data(3, n, length) for n in (0, 1, 3)),
                  codec.encode(packets.Data(3, 2, 0, bytes(changed[2 * PACKET:3 * PACKET])), PEER, LOCAL))
    assert rx.counts["accepted"] == 4
    assert await rx.check(0, 3, length) == 1
    assert await rx.download(0, length) == bytes(changed)
    assert await rx.check(0, 4, length) == length // W

    await rx.post(1, 5)
    pattern = pattern_bytes(5, length)
    await rx.feed(*(rx.data(5, n, length) for n in (0, 2, 3)),
                  codec.encode(packets.Data(5, 1, 0, pattern[2 * PACKET:3 * PACKET]), PEER, LOCAL))
    assert await rx.check(1, 5, length) == PACKET // W
    assert await rx.check(1, 5, PACKET) == 0  # a shorter check stops where it is told


@cocotb.test()
async def test_arrival_times(dut):
    """First and last arrival stamps and the running gap follow the packets' spacing."""
    rx = await Rx.create(dut)
    length = 8 * PACKET
    await rx.post(0, 3)
    pauses = [300, 300, 50, 50, 50, 1000, 20]
    for n in range(8):
        await rx.feed(rx.data(3, n, length))
        await ClockCycles(dut.clk, pauses[n] if n < 7 else 1)
    status = await rx.status(0)
    seen = rx.accepted_at
    assert status["last_at"] - status["first_at"] == seen[-1] - seen[0]
    gaps = [b - a for a, b in zip(seen, seen[1:])]
    mean = gaps[0]
    for gap in gaps[1:]:
        mean += (gap - mean) >> 3
    assert status["mean_gap"] == mean


@cocotb.test()
async def test_udp_mode(dut):
    """NETBLT-in-UDP: data and control packets arrive through the UDP header."""
    rx = await Rx.create(dut, udp=1)
    await rx.post(0, 3)
    udp = (2999).to_bytes(2, "big") + (2998).to_bytes(2, "big")
    raw = rx.data(3, 0, 100)
    await rx.feed(udp + (8 + len(raw)).to_bytes(2, "big") + bytes(2) + raw, protocol=17)
    assert rx.counts["accepted"] == 1
    wrong = (2999).to_bytes(2, "big") + (5000).to_bytes(2, "big")
    await rx.feed(wrong + (8 + len(raw)).to_bytes(2, "big") + bytes(2) + raw, protocol=17)
    await rx.feed(raw, protocol=L.IP_PROTOCOL)
    assert rx.counts["CONNECTION"] == 2
