"""cocotb tests of the whole engine (gateware/engine.py), driven only through its registers.

The loop test sends a pattern buffer out of ``net_tx``, through a lossy model, into
``net_rx`` of the same engine, then repairs it with the missing list and resends.
"""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from netblt.gateware.config import EngineConfig
from netblt.formats.registers import CONNECTION_FLAGS, ENGINE_STATE, GEOMETRY_WORD, RECEIVED_FLAGS, Command, Event
from netblt.gateware.sink_port import sink_word
from netblt.gateware.streams import ip_payload
from netblt.formats.pattern import pattern_bytes
from netblt.protocol import codec, packets
from netblt.sim.rtl.beats import BeatSink, BeatSource, beat_bytes
from netblt.sim.rtl.register_host import RegisterHost
from netblt.sim.rtl.testbench import start

CONFIG = EngineConfig()
W = CONFIG.beat_bytes
ADDRESS_SELF = 0x0A000001
PORT = 2998


class Path:
    """net_tx to net_rx: each packet lost, duplicated, corrupted or delayed at random."""

    def __init__(self, dut, rng: random.Random) -> None:
        layout = ip_payload(CONFIG.data_width)
        self.sink = BeatSink(dut, "net_tx", layout)
        self.source = BeatSource(dut, "net_rx", layout)
        self.rng = rng
        self.loss = self.duplication = self.corruption = self.reorder = 0.0
        self.queue: deque[list[dict]] = deque()
        self.held: list[list[dict]] = []
        self.lost: list[bytes] = []
        self.clk = dut.clk

    async def run(self) -> None:
        cocotb.start_soon(self.sink.run())
        taken = 0
        while True:
            packets_out = self.sink.packets()
            for _, beats in packets_out[taken:]:
                self.impair(beats)
            taken = len(packets_out)
            if self.queue:
                await self.source.send(self.queue.popleft())
            else:
                if self.held and self.rng.random() < 0.05:
                    self.queue.append(self.held.pop(0))
                await RisingEdge(self.clk)

    def impair(self, beats: list[dict]) -> None:
        rng = self.rng
        if rng.random() < self.loss:
            self.lost.append(beat_bytes(beats, W))
            return
        if rng.random() < self.corruption:
            bad = [dict(b) for b in beats]
            victim = rng.randrange(len(bad))
            bad[victim]["data"] ^= 1 << rng.randrange(8 * W)
            self.queue.append(bad)
        if rng.random() < self.duplication:
            self.queue.append(beats)
        if rng.random() < self.reorder:
            self.held.append(beats)
        else:
            self.queue.append(beats)

    def flush(self) -> None:
        self.queue.extend(self.held)
        self.held.clear()


async def connect(dut, *, udp: bool = False, data_checksum: bool = True, packet_size: int = 1024):
    await start(dut)
    host = RegisterHost(dut)
    path = Path(dut, random.Random(11))
    cocotb.start_soon(path.run())
    # The sink port's gateware: it takes a word in five cycles out of six.
    path.drained = BeatSink(dut, "sink", sink_word(CONFIG.data_width), stall=0.2, rng=random.Random(5))
    cocotb.start_soon(path.drained.run())
    await host.configure(PACKET_SIZE=packet_size, LOCAL_PORT=PORT, PEER_PORT=PORT, PEER_ADDRESS=ADDRESS_SELF,
                         UDP_LOCAL_PORT=PORT, UDP_PEER_PORT=PORT,
                         FLAGS=CONNECTION_FLAGS.pack(udp=udp, data_checksum=data_checksum))
    return host, path


@cocotb.test()
async def test_loop_through_a_lossy_path(dut):
    """Pattern out, impaired path, missing list, resends: the slot ends equal to the pattern."""
    host, path = await connect(dut)
    path.loss, path.duplication, path.corruption, path.reorder = 0.2, 0.1, 0.1, 0.2
    buffer, length, count = 41, 14_000, 14
    await host.command(Command.FILL, 1, buffer, length)
    assert (await host.wait_for(Event.FILLED))[1] == 1
    await host.command(Command.POST, 0, buffer)
    await host.command(Command.SEND, 1, buffer, length, flag=1)
    assert (await host.wait_for(Event.SENT))[1] == 1
    await ClockCycles(dut.clk, 3000)
    path.flush()
    await ClockCycles(dut.clk, 6000)

    lost = sorted({codec.decode(raw, data_checksum=True).packet.packet for raw in path.lost})
    missing = await host.missing(0, count)
    assert missing == lost
    assert missing, "the seed should lose something"
    path.loss = path.corruption = path.reorder = path.duplication = 0.0
    before = len(path.sink.packets())
    for number in missing:
        await host.command(Command.RESEND, 1, number)
    while True:
        event = await host.wait_for(Event.RECEIVED)
        if RECEIVED_FLAGS.unpack(event[2])["complete"]:
            break
    resent = [codec.decode(beat_bytes(beats, W), data_checksum=True).packet
              for _, beats in path.sink.packets()[before:]]
    assert [(p.buffer, p.packet) for p in resent] == [(buffer, n) for n in missing]
    # A download begun before a DRAIN goes on where it was after it (the drain borrows
    # the store's reader).
    words = await host.download(0, 3)
    await host.command(Command.DRAIN, 0, buffer, length)
    _, slot, _, mismatches = await host.wait_for(Event.DRAINED)
    assert (slot, mismatches) == (0, 0)
    words += await host.download_more(-(-length // 4) - 3)
    assert b"".join(w.to_bytes(4, "little") for w in words)[:length] == pattern_bytes(buffer, length)
    assert await host.read("COMMANDS_REJECTED") == 0  # no download read early
    await host.write("STATUS_SLOT", 0)
    assert await host.read("SLOT_STATE") == 0b111
    assert await host.read("SLOT_RECEIVED") == count
    assert await host.read("RX_ACCEPTED") == count
    assert await host.read("TX_PACKETS") == count + len(missing)


@cocotb.test()
async def test_each_slot_keeps_its_own_data(dut):
    """Transmit slot 0 holds one buffer while receive slot 0 takes another, then is sent
    into receive slot 1: the two sides' slots never share memory (in DRAM, each side
    has a half of the chip); each is drained to the sink port as it was sent."""
    host, path = await connect(dut)
    length = 6000
    for slot, buffer in ((0, 7), (1, 8)):
        await host.command(Command.FILL, slot, buffer, length)
        assert (await host.wait_for(Event.FILLED))[1] == slot
    for (tx_slot, rx_slot, buffer) in ((1, 0, 8), (0, 1, 7)):
        await host.command(Command.POST, rx_slot, buffer)
        await host.command(Command.SEND, tx_slot, buffer, length, flag=1)
        while not RECEIVED_FLAGS.unpack((await host.wait_for(Event.RECEIVED))[2])["complete"]:
            pass
    for rx_slot, buffer in ((0, 8), (1, 7)):
        before = len(path.drained.beats)
        await host.command(Command.DRAIN, rx_slot, buffer, length)
        _, slot, _, mismatches = await host.wait_for(Event.DRAINED)
        assert (slot, mismatches) == (rx_slot, 0)
        words = [beat for _, beat in path.drained.beats[before:]]
        assert beat_bytes(words, W) == pattern_bytes(buffer, length) and {w["buffer"] for w in words} == {buffer}


@cocotb.test()
async def test_control_packet_round_trip(dut):
    """The host's control packet leaves net_tx (in UDP too) and comes back to the FIFO."""
    host, _ = await connect(dut)
    for udp in (False, True):
        await host.write("FLAGS", CONNECTION_FLAGS.pack(udp=udp))
        await host.write("COUNTERS_CLEAR", 1)
        message = codec.encode(packets.Control((packets.Go(5, 2), packets.Ok(6, 1, 4, 20, 100))),
                               PORT, PORT)
        for i in range(0, len(message), 4):
            await host.write("SEND_DATA", int.from_bytes(message[i:i + 4], "little"))
        await host.write("SEND_LENGTH", len(message))
        await ClockCycles(dut.clk, 60)
        assert await host.read("CONTROL_LENGTH") == len(message)
        assert await host.read("CONTROL_FROM") == ADDRESS_SELF
        words = [await host.read("CONTROL_DATA") for _ in range(len(message) // 4)]
        assert b"".join(w.to_bytes(4, "little") for w in words) == message
        assert await host.read("CONTROL_LENGTH") == 0
        # Words that disagree with the length are never sent.
        await host.write("SEND_DATA", 1)
        await host.write("SEND_LENGTH", 40)
        await ClockCycles(dut.clk, 60)
        assert await host.read("CONTROL_LENGTH") == 0
        assert await host.read("COMMANDS_REJECTED") == 1
        assert await host.read("TX_CONTROL") == 1


@cocotb.test()
async def test_bad_commands_are_rejected(dut):
    """A command naming a slot or opcode the engine lacks is counted and skipped (the
    counters run on through a reset, so a case counts from what it finds)."""
    host, _ = await connect(dut)
    before = await host.read("COMMANDS_REJECTED")
    await host.command(Command.POST, CONFIG.rx_slots, 1)
    await host.command(Command.SEND, CONFIG.tx_slots + 3, 1, 100)
    await host.write("COMMAND", 15)
    await host.command(Command.SEND, 0, 1, CONFIG.slot_bytes + 4)
    await host.command(Command.FILL, 0, 9, 64)
    assert (await host.wait_for(Event.FILLED))[1] == 0
    assert await host.read("COMMANDS_REJECTED") == before + 4
    assert await host.read("SLOT_BYTES") == CONFIG.slot_bytes
    geometry = GEOMETRY_WORD.unpack(await host.read("GEOMETRY"))
    assert geometry == {"data_width": CONFIG.data_width, "tx_slots": CONFIG.tx_slots, "rx_slots": CONFIG.rx_slots,
                        "log2_max_packets": CONFIG.max_packets.bit_length() - 1, "fill": CONFIG.fill,
                        "check": CONFIG.check and CONFIG.sink, "take": CONFIG.take, "sink": CONFIG.sink}
    assert ENGINE_STATE.unpack(await host.read("STATE"))["slots_ready"] == 1  # in DRAM, start waited for it


@cocotb.test()
async def test_a_download_read_too_early_is_counted_not_stepped(dut):
    """DOWNLOAD_DATA read before the store has a word after a seek: 0, the address
    left where it was, counted; the words then come whole from that address."""
    host, _ = await connect(dut)
    before = await host.read("COMMANDS_REJECTED")
    await host.write("DOWNLOAD_ADDRESS", 5)
    assert await host.read("DOWNLOAD_DATA") == 0  # the next cycle: the store is still seeking
    assert await host.read("COMMANDS_REJECTED") == before + 1
    assert await host.read("DOWNLOAD_ADDRESS") == 5
    assert len(await host.download_more(4)) == 4
    assert await host.read("DOWNLOAD_ADDRESS") == 9
    assert await host.read("COMMANDS_REJECTED") == before + 1
