"""cocotb tests of the transmit side (gateware/transmit_path.py) under Verilator."""

from __future__ import annotations

import json
import random
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from scapy.layers.inet import UDP

from netblt.formats.registers import PacingMode
from netblt.formats.pattern import pattern_bytes
from netblt.gateware.pattern import PATTERN_COMMAND
from netblt.gateware.segmenter import TX_COMMAND, TX_SETTINGS
from netblt.gateware.streams import ip_payload
from netblt.gateware.transmit_path import PACING
from netblt.protocol import codec, packets
from netblt.formats import rfc998 as L
from netblt.sim.rtl.beats import BeatSink, BeatSource, beat_bytes
from netblt.sim.rtl.testbench import CONFIG, apply, start

W = CONFIG.beat_bytes
VECTORS = {v["name"]: v for v in json.loads(
    (Path(__file__).parent.parent / "vectors" / "packets.json").read_text())}
LOCAL, PEER = 2998, 40001
PEER_ADDRESS = 0x0A000002


class Tx:
    """The transmitter with its streams attached and connection registers set."""

    def __init__(self, dut, *, stall: float = 0.0, **settings) -> None:
        self.dut = dut
        self.commands = BeatSource(dut, "command", TX_COMMAND)
        self.fills = BeatSource(dut, "fill", PATTERN_COMMAND)
        self.takes = BeatSource(dut, "take", PATTERN_COMMAND)
        self.sink = BeatSink(dut, "out", ip_payload(CONFIG.data_width), stall=stall)
        self.settings = {"packet_size": 1024, "local_port": LOCAL, "peer_port": PEER,
                         "peer_address": PEER_ADDRESS, "udp_local_port": 2998,
                         "udp_peer_port": 2999, **settings}
        apply(dut.settings, TX_SETTINGS, self.settings)
        self.pace(PacingMode.OFF)
        dut.upload__en.value = 0

    @classmethod
    async def create(cls, dut, **kwargs) -> Tx:
        await start(dut)
        tx = cls(dut, **kwargs)
        cocotb.start_soon(tx.sink.run())
        return tx

    def pace(self, mode: PacingMode, burst_size: int = 0, interval: int = 1) -> None:
        apply(self.dut.pacing, PACING, {"mode": mode, "burst_size": burst_size, "interval": interval})

    def hold(self) -> None:
        """No packet starts (a burst of 0) while commands queue up."""
        self.pace(PacingMode.BURSTS, 0, 10)

    async def release(self, mode: PacingMode = PacingMode.OFF, burst_size: int = 0,
                      interval: int = 1) -> None:
        """Lets the queued work go, once the resend queue shows what was pushed."""
        await ClockCycles(self.dut.clk, 4)
        self.sink.beats.clear()
        self.pace(mode, burst_size, interval)

    async def upload(self, slot: int, offset: int, data: bytes, every: int = 1) -> None:
        """A word each ``every`` cycles while ``upload_room`` has room for it beyond the
        last cycle's write (which it may not show yet)."""
        assert offset % W == 0
        base = slot * CONFIG.slot_words + offset // W
        for i in range(0, len(data), W):
            while int(self.dut.upload_room.value) <= 1:
                self.dut.upload__en.value = 0
                await RisingEdge(self.dut.clk)
            self.dut.upload__addr.value = base + i // W
            self.dut.upload__data.value = int.from_bytes(data[i:i + W].ljust(W, b"\0"), "little")
            self.dut.upload__en.value = 1
            await RisingEdge(self.dut.clk)
            self.dut.upload__en.value = 0
            if every > 1:
                await ClockCycles(self.dut.clk, every - 1)

    async def fill(self, slot: int, buffer: int, length: int, wait: bool = True) -> None:
        """A FILL command; with ``wait``, until the slot is filled."""
        await self.fills.send([{"slot": slot, "buffer": buffer, "length": length}])
        while wait:
            await RisingEdge(self.dut.clk)
            if self.dut.filled.value:
                return

    async def send(self, slot: int, buffer: int, length: int, last_buffer: bool = False) -> None:
        await self.commands.send([{"slot": slot, "buffer": buffer, "length": length,
                                   "last_buffer": last_buffer}])

    async def resend(self, slot: int, *numbers: int) -> None:
        await self.commands.send([{"resend": 1, "slot": slot, "packet": p} for p in numbers])

    def count_rejected(self) -> list[int]:
        """A running count (its one item) of the commands rejected from now on."""
        counted = [0]

        async def count() -> None:
            while True:
                await RisingEdge(self.dut.clk)
                counted[0] += int(self.dut.rejected.value)

        cocotb.start_soon(count())
        return counted

    async def packets(self, count: int, limit: int = 200_000) -> list[tuple[int, list[dict]]]:
        for _ in range(limit):
            if len(self.sink.packets()) >= count:
                break
            await RisingEdge(self.dut.clk)
        await ClockCycles(self.dut.clk, 50)
        got = self.sink.packets()
        assert len(got) == count, f"{len(got)} packets, expected {count}"
        return got


def frame(beats: list[dict], data_checksum: bool = False) -> codec.Frame:
    return codec.decode(beat_bytes(beats, W), data_checksum=data_checksum)


@cocotb.test()
async def test_golden_vectors(dut):
    """DATA and LDATA packets match the host's golden vectors byte for byte."""
    tx = await Tx.create(dut)
    cases = [("data", 0, 32 * 5), ("data_checksum", 1, 32 * 6), ("ldata_last_odd", 0, 64 + 5)]
    for name, slot, length in cases:
        vector = VECTORS[name]
        fields = vector["fields"]
        payload = bytes.fromhex(fields["payload"])
        apply(dut.settings, TX_SETTINGS, {**tx.settings, "packet_size": 32,
                                          "data_checksum": vector["data_checksum"],
                                          "high_ack": fields["high_ack"],
                                          "local_port": vector["local_port"],
                                          "peer_port": vector["foreign_port"]})
        await tx.upload(slot, fields["packet"] * 32, payload)
        tx.hold()
        await tx.send(slot, fields["buffer"], length, fields["last_buffer"])
        await tx.resend(slot, fields["packet"])
        await tx.release()
        start, beats = (await tx.packets(len(range(0, length, 32)) + 1))[0]
        assert beat_bytes(beats, W).hex() == vector["hex"], name
        assert {b["protocol"] for b in beats} == {L.IP_PROTOCOL}
        assert {b["address"] for b in beats} == {PEER_ADDRESS}
        assert {b["length"] for b in beats} == {len(vector["hex"]) // 2}


@cocotb.test()
async def test_buffer_is_segmented_in_order(dut):
    """A buffer goes out as DATA packets and one LDATA, every field as the codec reads it."""
    tx = await Tx.create(dut, stall=0.3, data_checksum=1, high_ack=41)
    length = 5 * 1024 + 333
    await tx.fill(1, 77, length)
    await tx.send(1, 77, length, last_buffer=True)
    got = await tx.packets(6)
    data = b""
    for number, (_, beats) in enumerate(got):
        f = frame(beats, data_checksum=True)
        assert isinstance(f.packet, packets.Data)
        assert (f.local_port, f.foreign_port) == (LOCAL, PEER)
        assert (f.packet.buffer, f.packet.packet, f.packet.high_ack) == (77, number, 41)
        assert f.packet.ldata == (number == 5) and f.packet.last_buffer
        data += f.packet.payload
    assert data == pattern_bytes(77, length)


@cocotb.test()
async def test_a_send_right_behind_a_fill_sends_the_pattern(dut):
    """The host queues a FILL and the SEND of its slot together, not waiting for FILLED
    (data born on the board costs it no round trip a buffer), right after an upload to
    that slot: the packets carry the pattern, with data checksums that cover it, not the
    upload's words (in DRAM, still queued when the FILL came) nor the slot's old data."""
    tx = await Tx.create(dut, data_checksum=1, packet_size=256)
    length = 4 * 256 + 100
    await tx.upload(0, 0, bytes(length))
    await tx.fill(0, 9, length, wait=False)
    await tx.send(0, 9, length)
    data = b"".join(frame(beats, data_checksum=True).packet.payload for _, beats in await tx.packets(5))
    assert data == pattern_bytes(9, length)


@cocotb.test()
async def test_a_send_right_behind_a_take_sends_the_words_taken(dut):
    """A source that cannot wait offers 1, 2, 3 ... a word a cycle from the start; a
    TAKE of a slot (right after an upload to it) and its SEND queued together: the packets
    carry consecutive words, those offered before the take began are refused, and the
    port's strobes count every word offered, taken or refused."""
    tx = await Tx.create(dut, data_checksum=1, packet_size=256)
    counts = {"offered": 0, "taken": 0, "refused": 0}

    async def source() -> None:
        number = 0
        while True:
            number += 1
            dut.source__payload.value, dut.source__valid.value = number, 1
            counts["offered"] += 1
            await RisingEdge(dut.clk)
            counts["taken"] += int(dut.taken.value)
            counts["refused"] += int(dut.refused.value)
            if number == 3000:
                dut.source__valid.value = 0
                return

    length = 4 * 256
    await tx.upload(0, 0, bytes(length))
    cocotb.start_soon(source())
    await ClockCycles(dut.clk, 20)
    await tx.takes.send([{"slot": 0, "buffer": 0, "length": length}])
    await tx.send(0, 9, length)
    data = b"".join(frame(beats, data_checksum=True).packet.payload for _, beats in await tx.packets(4))
    first = int.from_bytes(data[:W], "little")
    assert first > 20 and data == b"".join((first + i).to_bytes(W, "little") for i in range(length // W))
    await ClockCycles(dut.clk, 3000)
    assert counts["taken"] == length // W and counts["taken"] + counts["refused"] == counts["offered"] == 3000


@cocotb.test()
async def test_high_ack_changing_mid_packet(dut):
    """The host stamps a new high-ack whenever it likes, also while a packet is on its
    way out: each packet carries one value, with a header checksum that covers it."""
    tx = await Tx.create(dut, high_ack=1)
    length = 8 * 1024
    await tx.fill(0, 5, length)
    await tx.send(0, 5, length)
    stamps = set()
    for cycle in range(60_000):
        await RisingEdge(dut.clk)
        if cycle % 37 == 0:  # never in step with a packet's beats
            tx.settings["high_ack"] = cycle & 0xFFFF
            apply(dut.settings, TX_SETTINGS, tx.settings)
        if len(tx.sink.packets()) == 8:
            break
    for _, beats in await tx.packets(8):
        packet = frame(beats).packet  # raises on a bad header checksum
        stamps.add(packet.high_ack)
    assert len(stamps) > 4  # the stamp did change from packet to packet


@cocotb.test()
async def test_data_checksums_summed_while_written(dut):
    """Data checksums come from the sums made as the slot was written, when they cover
    exactly the packet; otherwise the segmenter reads the data first. Right either way."""
    tx = await Tx.create(dut, data_checksum=1, packet_size=256)
    data = random.Random(5).randbytes(1024)

    async def send(slot: int, buffer: int, length: int, size: int) -> list[bool]:
        """Sends and checks a buffer; says of each packet after the first whether its data
        was read to sum it before it started."""
        apply(dut.settings, TX_SETTINGS, {**tx.settings, "packet_size": size})
        tx.sink.beats.clear()
        await tx.send(slot, buffer, length)
        got = await tx.packets(-(-length // size))
        for number, (_, beats) in enumerate(got):
            p = frame(beats, data_checksum=True).packet  # the codec checks the data checksum
            assert (p.buffer, p.packet) == (buffer, number)
            assert p.payload == data[number * size:number * size + len(p.payload)]
        starts = [start for start, _ in got]
        # A gap is one packet's header and data and a few cycles of choosing; a read pass
        # over the next packet's data (at least 32 beats here) adds its length.
        one_packet = (L.DATA_HEADER_SIZE + size) // W
        return [b - a - one_packet > 16 for a, b in zip(starts, starts[1:])]

    await tx.upload(0, 0, data)  # in order: every packet's sum is in the table
    assert await send(0, 1, 1024, 256) == [False] * 3
    # The last packet ends before the written data does: its sum would count too much.
    assert await send(0, 2, 1024 - 44, 256) == [False, False, True]
    for word in reversed(range(0, len(data), W)):  # out of order: nothing is trusted
        await tx.upload(1, word, data[word:word + W])
    assert await send(1, 3, 1024, 256) == [True] * 3
    await tx.upload(0, 0, data)  # summed for 256-byte packets, sent as 128-byte ones
    assert await send(0, 4, 1024, 128) == [True] * 7


@cocotb.test()
async def test_resends_first_then_buffers_in_number_order(dut):
    """RFC 969's priority pipe: queued resends, then the lowest buffer number first."""
    tx = await Tx.create(dut, packet_size=256)
    tx.hold()
    await tx.fill(0, 9, 1000)
    await tx.fill(1, 8, 600)
    await tx.send(0, 9, 1000)
    await tx.send(1, 8, 600)
    await tx.resend(0, 2, 0)
    await tx.release()
    got = [frame(beats).packet for _, beats in await tx.packets(2 + 3 + 4)]
    order = [(p.buffer, p.packet) for p in got]
    assert order == [(9, 2), (9, 0), (8, 0), (8, 1), (8, 2), (9, 0), (9, 1), (9, 2), (9, 3)]
    assert [p.ldata for p in got] == [False, False, False, False, True, False, False, False, True]
    assert all(p.payload == pattern_bytes(p.buffer, 1000 if p.buffer == 9 else 600)[
        p.packet * 256:(p.packet + 1) * 256] for p in got)


@cocotb.test()
async def test_uploads_while_another_slot_is_sent(dut):
    """Slot 1 is uploaded while slot 0's packets go out and two of them are resent, the
    link stalling at random; then slot 1 is sent. Every packet is byte-exact: a store
    whose writes wait (DRAM) queues the uploads, and a fetch waits for those queued."""
    tx = await Tx.create(dut, packet_size=256, stall=0.3)
    rng = random.Random(9)
    data = {1: rng.randbytes(4096), 2: rng.randbytes(4096 - 20)}
    await tx.upload(0, 0, data[1])
    await tx.send(0, 1, len(data[1]))
    await tx.upload(1, 0, data[2])
    await tx.resend(0, 3, 1)
    await tx.send(1, 2, len(data[2]))
    got = [frame(beats).packet for _, beats in await tx.packets(16 + 2 + 16)]
    assert sorted((p.buffer, p.packet) for p in got) == sorted(
        [(1, n) for n in range(16)] + [(1, 1), (1, 3)] + [(2, n) for n in range(16)])
    for p in got:
        assert p.payload == data[p.buffer][p.packet * 256:(p.packet + 1) * 256], (p.buffer, p.packet)


@cocotb.test()
async def test_a_send_at_once_after_its_upload_sends_what_was_uploaded(dut):
    """A short buffer is uploaded behind a long one (which a store in DRAM takes slower
    than a word a cycle, so uploads queue) and sent at once: its packet has the data."""
    tx = await Tx.create(dut, packet_size=1024)
    rng = random.Random(10)
    for buffer in (1, 2):
        await tx.upload(0, 0, rng.randbytes(12288))
        data = rng.randbytes(256)
        await tx.upload(1, 0, data)
        await tx.send(1, buffer, len(data))
        (_, beats), = await tx.packets(1)
        assert frame(beats).packet.payload == data
        tx.sink.beats.clear()


@cocotb.test()
async def test_a_send_goes_while_uploads_stream_into_another_slot(dut):
    """Uploads into slot 1 a word every other cycle, never pausing, while slot 0 is
    sent: its packets leave during the upload, byte-exact (a fetch waits only for the
    uploads queued before it came, not for the stream to pause)."""
    tx = await Tx.create(dut, packet_size=1024)
    rng = random.Random(11)
    data = rng.randbytes(4096)
    await tx.upload(0, 0, data)
    streaming = cocotb.start_soon(tx.upload(1, 0, rng.randbytes(CONFIG.slot_bytes), every=2))
    await tx.send(0, 1, len(data))
    got = [frame(beats).packet for _, beats in await tx.packets(4)]
    assert not streaming.done(), "the packets waited for the uploads to end"
    assert [p.payload for p in got] == [data[n * 1024:(n + 1) * 1024] for n in range(4)]
    await streaming


@cocotb.test()
async def test_resend_past_the_buffer_is_rejected(dut):
    """A resend of a packet the buffer does not have sends nothing and is counted."""
    tx = await Tx.create(dut, packet_size=256)
    tx.hold()
    await tx.fill(0, 3, 512)
    await tx.send(0, 3, 512)
    rejected = tx.count_rejected()
    await tx.resend(0, 2, 1, 7000)
    await tx.resend(5, 0)  # no such slot (with 16, one not loaded)
    await tx.release()
    got = [frame(beats).packet for _, beats in await tx.packets(3)]
    assert [(p.buffer, p.packet) for p in got] == [(3, 1), (3, 0), (3, 1)]
    assert rejected == [3]


@cocotb.test()
async def test_every_slot_in_buffer_number_order(dut):
    """Every slot loaded, in no order: the first passes go lowest buffer first, each
    packet once and nothing rejected. Then every slot again, sent as earlier ones go
    out: each packet once, each buffer's in order. With more than two slots the choice
    of the next buffer is registered (segmenter._first_buffer): it must see a slot
    loaded, and not take one it has just finished. Last, buffer numbers across the
    32-bit wrap: the order is the numbers', as serial numbers."""
    tx = await Tx.create(dut, packet_size=64)
    rng = random.Random(11)
    rejected = tx.count_rejected()
    count = CONFIG.tx_slots
    wrap = [(1 << 32) - count // 2 + i & 0xFFFFFFFF for i in range(count)]
    for held, numbers in ((True, rng.sample(range(1, 1000), count)), (False, rng.sample(range(1, 1000), count)),
                          (True, wrap)):
        slots = rng.sample(range(count), count)
        buffers = dict(zip(slots, numbers))
        lengths = {slot: rng.choice((40, 64, 100, 128, 192)) for slot in slots}
        for slot in slots:
            await tx.fill(slot, buffers[slot], lengths[slot])
        if held:
            tx.hold()
        for slot in slots:
            await tx.send(slot, buffers[slot], lengths[slot])
        if held:
            await tx.release()
        first = min(numbers, key=lambda b: (b - numbers[0] + (1 << 31)) % (1 << 32))  # in serial order
        expected = sorted(((buffers[s], n) for s in slots for n in range((lengths[s] + 63) // 64)),
                          key=lambda bn: ((bn[0] - first) % (1 << 32), bn[1]))
        got = [frame(beats).packet for _, beats in await tx.packets(len(expected))]
        tx.sink.beats.clear()
        order = [(p.buffer, p.packet) for p in got]
        if held:
            assert order == expected
        else:
            assert sorted(order) == sorted(expected)
            assert all(order.index((b, n)) < order.index((b, n + 1)) for b, n in expected if (b, n + 1) in order)
        length = {buffers[s]: lengths[s] for s in slots}
        assert all(p.payload == pattern_bytes(p.buffer, length[p.buffer])[p.packet * 64:(p.packet + 1) * 64]
                   for p in got)
    assert rejected == [0]


@cocotb.test()
async def test_udp_mode(dut):
    """NETBLT-in-UDP: an 8-byte UDP header with checksum 0, read back by scapy."""
    tx = await Tx.create(dut, udp=1)
    await tx.fill(0, 4, 1500)
    await tx.send(0, 4, 1500)
    got = await tx.packets(2)
    for number, (_, beats) in enumerate(got):
        raw = beat_bytes(beats, W)
        udp = UDP(raw)
        assert (udp.sport, udp.dport, udp.len, udp.chksum) == (2998, 2999, len(raw), 0)
        assert {b["protocol"] for b in beats} == {17}
        f = codec.decode(bytes(udp.payload))
        assert (f.packet.buffer, f.packet.packet) == (4, number)


async def paced_starts(dut, mode: PacingMode, burst_size: int, interval: int) -> list[int]:
    """The start cycles of 60 packets of 64 bytes sent under this pacing."""
    tx = await Tx.create(dut, packet_size=64)
    tx.hold()
    await tx.fill(0, 1, 64 * 60)
    await tx.send(0, 1, 64 * 60)
    await tx.release(mode, burst_size, interval)
    return [start for start, _ in await tx.packets(60, limit=20_000)]


@cocotb.test()
async def test_burst_pacing(dut):
    """BURSTS: burst_size packets back to back at each interval, on the same cycle offset."""
    starts = await paced_starts(dut, PacingMode.BURSTS, 3, 400)
    bursts = [starts[i:i + 3] for i in range(0, 60, 3)]
    firsts = [b[0] for b in bursts]
    assert {b - a for a, b in zip(firsts, firsts[1:])} == {400}
    # Within a burst, packets follow each other as fast as the segmenter goes.
    assert len({tuple(x - b[0] for x in b) for b in bursts}) == 1


@cocotb.test()
async def test_smooth_pacing(dut):
    """SMOOTH: the same rate, the packets spread evenly (to the cycle) over the interval."""
    starts = await paced_starts(dut, PacingMode.SMOOTH, 3, 400)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert set(gaps) <= {133, 134}
    assert starts[-1] - starts[0] in range(59 * 400 // 3 - 1, 59 * 400 // 3 + 2)
