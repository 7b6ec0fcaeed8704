"""cocotb tests of the host link (gateware/host_link.py) with the host's own client.

driver/link.py's LinkClient, the code a host runs, speaks to the block through its
network streams, its datagrams built and checked by scapy and some lost or duplicated
on the way; a model of the engine's registers answers on the bus (EVENT and the
control-packet FIFO pop, the memory registers step their addresses), counting every
access so that anything done twice shows.
"""

from __future__ import annotations

import random
import struct
from collections import Counter, deque

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, ReadWrite, RisingEdge
from cocotb.utils import get_sim_time
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from scapy.utils import checksum

from netblt.formats import host_link as F
from netblt.driver.link_client import LinkClient, LinkError
from netblt.gateware.receive_store import READ_AHEAD
from netblt.formats.registers import ADDRESS, ENGINE_REGISTERS, LINK_REGISTERS, REGISTER_MAP
from netblt.formats.rfc998 import UDP_PROTOCOL
from netblt.gateware.streams import ip_payload
from netblt.gateware.transmit_path import UPLOAD_ROOM
from netblt.formats import rfc998 as L
from netblt.sim.rtl.beats import BeatSink, BeatSource, beat_bytes, to_beats, unpack
from netblt.sim.rtl.testbench import start

from link_intake_tb import BOARD, BOARD_INT, HOST, HOST_INT, HOST_PORT

MEMORY_WORDS = 4096


class EngineModel:
    """The engine's registers as the bus sees them, a read answered the next cycle.

    Downloads come from a slow store: after DOWNLOAD_ADDRESS is written, no word is ready
    for up to 40 cycles, then words come one every cycle or few, up to DOWNLOAD_LEVEL's
    READ_AHEAD; a DOWNLOAD_DATA read with none ready is counted in ``early``. Uploads go
    into a queue of UPLOAD_ROOM words, drained at random; the room it shows counts a
    write two cycles after the bus carries it, as the engine's does (control.py's
    register, then the level), and a write into a full queue is counted in ``overflows``."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.rng = random.Random(4)
        self.level, self.delay, self.early = 0, 0, 0
        self.queued, self.overflows = 0, 0
        self.queued_before = deque([0, 0])
        """The queue's level at the end of each of the last two cycles."""
        self.values = {ADDRESS[r.name]: 0 for r in ENGINE_REGISTERS}
        self.events: deque[int] = deque()
        self.packets: deque[tuple[bytes, int, int]] = deque()
        self.current: list[int] = []
        self.tx = [0] * MEMORY_WORDS
        self.rx = [0] * MEMORY_WORDS
        self.reads: Counter[str] = Counter()
        self.uploaded_at_event: int | None = None
        """UPLOAD_ADDRESS when EVENT was first read: how far uploads had gone."""
        names = {ADDRESS[r.name]: r.name for r in ENGINE_REGISTERS}
        self.names = names
        dut.bus__r_data.value = 0

    async def run(self) -> None:
        dut, v = self.dut, self.values
        while True:
            dut.events_waiting.value = int(bool(self.events))
            dut.control_next.value = len(self.packets[0][0]) if self.packets else 0
            # A write of DOWNLOAD_ADDRESS empties the level in its own cycle, as the store's
            # seek does: set it once the block's registered bus outputs have settled.
            await ReadWrite()
            seeking = dut.bus__w_en.value and int(dut.bus__addr.value) == ADDRESS["DOWNLOAD_ADDRESS"]
            dut.download_level.value = 0 if seeking else self.level
            dut.upload_room.value = UPLOAD_ROOM - self.queued_before[0]
            await ReadOnly()
            answer = None
            address = int(dut.bus__addr.value)
            name = self.names.get(address)
            if dut.bus__w_en.value:
                value = int(dut.bus__w_data.value)
                if name == "UPLOAD_DATA":
                    self.overflows += self.queued == UPLOAD_ROOM
                    self.queued += 1
                    self.tx[v[ADDRESS["UPLOAD_ADDRESS"]]] = value
                    v[ADDRESS["UPLOAD_ADDRESS"]] += 1
                else:
                    v[address] = value
                if name == "DOWNLOAD_ADDRESS":
                    self.level, self.delay = 0, self.rng.randrange(40)
            if dut.bus__r_en.value:
                self.reads[name] += 1
                answer = self.read(name, address)
            self.refill()
            self.queued_before.append(self.queued)
            self.queued_before.popleft()
            await RisingEdge(dut.clk)
            if answer is not None:
                dut.bus__r_data.value = answer

    def read(self, name: str, address: int) -> int:
        v = self.values
        if name == "EVENT":
            if self.uploaded_at_event is None:
                self.uploaded_at_event = v[ADDRESS["UPLOAD_ADDRESS"]]
            return self.events.popleft() if self.events else 0
        if name == "CONTROL_LENGTH":
            if not self.packets:
                return 0
            packet, source, port = self.packets.popleft()
            v[ADDRESS["CONTROL_FROM"]], v[ADDRESS["CONTROL_PORT"]] = source, port
            padded = packet + bytes(-len(packet) % 4)
            self.current = [int.from_bytes(padded[i:i + 4], "little") for i in range(0, len(padded), 4)]
            return len(packet)
        if name == "CONTROL_DATA":
            return self.current.pop(0) if self.current else 0
        if name == "DOWNLOAD_DATA":
            if not self.level:
                self.early += 1
                return 0
            self.level -= 1
            value = self.rx[v[ADDRESS["DOWNLOAD_ADDRESS"]]]
            v[ADDRESS["DOWNLOAD_ADDRESS"]] += 1
            return value
        return v[address]

    def refill(self) -> None:
        if self.queued and self.rng.random() < 0.4:
            self.queued -= 1
        if self.delay:
            self.delay -= 1
        elif self.level < READ_AHEAD and self.rng.random() < 0.6:
            self.level += 1


class Network:
    """The host's end of the block's network streams, losing and duplicating datagrams."""

    def __init__(self, dut, seed: int = 1, loss: float = 0.0, duplicate: float = 0.0) -> None:
        self.dut = dut
        self.random = random.Random(seed)
        self.loss, self.duplicate = loss, duplicate
        self.source = BeatSource(dut, "net_rx", ip_payload(32))
        self.sink = BeatSink(dut, "net_tx", ip_payload(32))
        self.engine_rx = BeatSink(dut, "engine_rx", ip_payload(32))
        self.engine_tx = BeatSource(dut, "engine_tx", ip_payload(32))
        self.taken = 0
        self.gaps = 0
        """Cycles a datagram stopped part-way on ``net_tx``: LiteEth would cut its frame short."""
        cocotb.start_soon(self.sink.run())
        cocotb.start_soon(self.engine_rx.run())
        cocotb.start_soon(self._watch_gaps())

    async def _watch_gaps(self) -> None:
        valid, ready, payload = self.dut.net_tx__valid, self.dut.net_tx__ready, self.dut.net_tx__payload
        within = False
        while True:
            await ReadOnly()
            if within and not valid.value:
                self.gaps += 1
            elif valid.value and ready.value:
                within = not unpack(ip_payload(32), int(payload.value))["last"]
            await RisingEdge(self.dut.clk)

    async def send(self, payload: bytes, sport: int = HOST_PORT) -> None:
        if self.random.random() < self.loss:
            return
        raw = bytes(IP(src=HOST, dst=BOARD) / UDP(sport=sport, dport=F.LINK_PORT) / Raw(payload))[20:]
        for _ in range(2 if self.random.random() < self.duplicate else 1):
            await self.source.send(to_beats(raw, 4, address=HOST_INT, protocol=UDP_PROTOCOL, length=len(raw)))

    def received(self, port: int = HOST_PORT) -> list[bytes]:
        """Link datagrams the block sent to ``port`` since the last call, checked; some lost."""
        packets = self.sink.packets()
        out = []
        for _, beats in packets[self.taken:]:
            raw = beat_bytes(beats, 4)
            if beats[0]["protocol"] != UDP_PROTOCOL or UDP(raw).sport != F.LINK_PORT:
                continue  # the engine's
            udp = UDP(raw)
            assert all(b["address"] == HOST_INT and b["protocol"] == UDP_PROTOCOL for b in beats)
            assert udp.sport == F.LINK_PORT and udp.len == len(raw)
            if raw[6:8] != b"\0\0":
                pseudo = struct.pack(">IIHH", BOARD_INT, HOST_INT, 17, len(raw))
                assert checksum(pseudo + raw) == 0, "UDP checksum"
            if udp.dport == port and self.random.random() >= self.loss:
                out.append(raw[8:])
        self.taken = len(packets)
        return out


def now() -> float:
    return get_sim_time("ns") / 1e9


async def drive(net: Network, client: LinkClient, until, port: int = HOST_PORT, limit_us: float = 20_000) -> None:
    """Run the client against the block until ``until()`` or a LinkError."""
    end = now() + limit_us / 1e6
    while not until():
        assert now() < end, "no progress"
        for datagram in client.outgoing(now()):
            await net.send(datagram, port)
        for datagram in net.received(port):
            client.receive(datagram, now())
        client.timeout(now())
        await ClockCycles(net.dut.clk, 16)


async def setup(dut, **impairment) -> tuple[EngineModel, Network, LinkClient]:
    await start(dut)
    dut.link_up.value = 1
    engine = EngineModel(dut)
    cocotb.start_soon(engine.run())
    net = Network(dut, **impairment)
    # The block answers in about 5 us: a 15 us floor for the retry keeps each loss's wait short
    # of the simulation's time (60 us tripled the loss test's 40 requests to 7 ms, 1 minute).
    client = LinkClient(retry=15e-6, give_up=0.01)
    client.open()
    await drive(net, client, lambda: client.opened)
    return engine, net, client


def registers(*ops: F.Operation) -> bytes:
    return F.encode_operations(list(ops))


@cocotb.test()
async def test_registers_of_the_engine_and_of_the_link(dut):
    engine, net, client = await setup(dut)
    engine.values[ADDRESS["CYCLES"]] = 1234
    request = client.submit(F.Type.REGISTERS, registers(
        F.Operation(F.Opcode.WRITE, ADDRESS["PEER_ADDRESS"], 0x0A000002),
        F.Operation(F.Opcode.READ, ADDRESS["CYCLES"]),
        F.Operation(F.Opcode.WRITE, ADDRESS["NETMASK"], 0xFFFF0000),
        F.Operation(F.Opcode.READ, ADDRESS["NETMASK"]),
        F.Operation(F.Opcode.READ, ADDRESS["REGISTER_MAP"]),
        F.Operation(F.Opcode.READ, ADDRESS["LINK_SESSION"]),
        F.Operation(9, 3)))
    await drive(net, client, lambda: request.reply is not None)
    header, body = request.reply
    assert (header.status, header.session, header.ack) == (F.Status.OK, client.session, 2)
    done = F.decode_operations(body)
    assert [op.opcode for op in done] == [0x81, 0x82, 0x81, 0x82, 0x82, 0x82, 9]  # unknown: not DONE
    assert [op.value for op in done[1:6]] == [1234, 0xFFFF0000, 0xFFFF0000, REGISTER_MAP, client.session]
    assert engine.values[ADDRESS["PEER_ADDRESS"]] == 0x0A000002
    assert int(dut.netmask.value) == 0xFFFF0000


@cocotb.test()
async def test_every_request_runs_exactly_once_through_loss_and_duplication(dut):
    engine, net, client = await setup(dut, seed=3, loss=0.2, duplicate=0.2)
    engine.rx[:40] = range(1, 41)  # each read of DOWNLOAD_DATA steps its address: a read twice shows
    requests = [client.submit(F.Type.REGISTERS, registers(F.Operation(F.Opcode.WRITE, ADDRESS["ARG0"], i),
                                                          F.Operation(F.Opcode.READ, ADDRESS["DOWNLOAD_DATA"])))
                for i in range(40)]
    await drive(net, client, lambda: all(r.reply for r in requests), limit_us=60_000)
    assert [F.decode_operations(r.reply[1])[1].value for r in requests] == list(range(1, 41))
    assert engine.reads["DOWNLOAD_DATA"] == 40  # each exactly once
    assert engine.values[ADDRESS["ARG0"]] == 39
    assert client.replays + client.resent > 0  # the loss was real and was recovered from


@cocotb.test()
async def test_uploads_and_downloads_are_byte_exact_through_loss(dut):
    engine, net, client = await setup(dut, seed=4, loss=0.15, duplicate=0.1)
    rng = random.Random(9)
    data = bytes(rng.randrange(256) for _ in range(4 * 1500))
    engine.rx[:1500] = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)][::-1]
    uploads = [client.submit(*request) for request in F.upload_requests(100, data, 1500)]
    downloads = [client.submit(*request) for request in F.download_requests(0, len(data), 1500)]
    # The same again, a DOWNLOAD in three replies (the last request's two, the second short).
    in_parts = [client.submit(*request) for request in F.download_requests(0, len(data), 1500, parts=3)]
    await drive(net, client, lambda: all(r.reply for r in uploads + downloads + in_parts), limit_us=90_000)
    assert b"".join(w.to_bytes(4, "little") for w in engine.tx[100:1600]) == data
    got = b"".join(r.reply[1] for r in downloads)
    assert got == b"".join(w.to_bytes(4, "little") for w in engine.rx[:1500])
    assert len(in_parts) == 2 and b"".join(r.reply[1] for r in in_parts) == got
    assert engine.early == 0  # no word read before the store had it
    assert net.gaps == 0  # each reply's body was read before it started: no frame cut short
    assert engine.overflows == 0  # no word written past the room the engine showed
    assert all(r.reply[1] == b"" for r in uploads)  # acknowledged, not echoed


@cocotb.test()
async def test_a_download_whose_reply_lost_a_part_is_replayed_whole(dut):
    """A DOWNLOAD in three replies, the middle one lost: the request is not answered by
    the others; the host's recovery (STATUS, RESEND) brings all three again, each with
    where its words start, read from slot memory once more."""
    engine, net, client = await setup(dut, seed=6)
    engine.rx[:1000] = range(7, 1007)
    (spec,) = F.download_requests(0, 4000, 1500, parts=3)
    request = client.submit(*spec)
    for datagram in client.outgoing(now()):
        await net.send(datagram)
    replies: list[bytes] = []
    for _ in range(2000):
        replies += net.received()
        if len(replies) == 3:
            break
        await ClockCycles(dut.clk, 16)
    assert [F.decode(d)[0].value for d in replies] == [0, 364, 728]
    for datagram in (replies[0], replies[2]):
        client.receive(datagram, now())
    assert request.reply is None and engine.reads["DOWNLOAD_DATA"] == 1000
    await drive(net, client, lambda: request.reply is not None)
    assert request.reply[1] == b"".join(w.to_bytes(4, "little") for w in engine.rx[:1000])
    assert request.reply[0].value == 0
    await ClockCycles(dut.clk, 2000)  # answered at its second part: the third goes on
    assert engine.reads["DOWNLOAD_DATA"] == 2000  # the replay read them all again, once


@cocotb.test()
async def test_events_and_control_packets_are_pushed_once_and_in_order_through_loss(dut):
    engine, net, client = await setup(dut, seed=5, loss=0.2)
    await drive(net, client, lambda: True)
    request = client.submit(F.Type.REGISTERS, registers(F.Operation(F.Opcode.WRITE, ADDRESS["PUSH_TIMEOUT"], 2000)))
    await drive(net, client, lambda: request.reply is not None)
    events = [0x8000_0000 | n for n in range(300)]
    packets = [(bytes(range(n, n + 21 + n)), 0x0A000000 + n, 2998) for n in range(5)]
    engine.events.extend(events)
    engine.packets.extend(packets)
    got_events, got_packets = [], []

    def all_in() -> bool:
        pushed = client.take_pushed()
        got_events.extend(pushed.events)
        got_packets.extend(pushed.packets)
        return len(got_events) == len(events) and len(got_packets) == len(packets)

    held = client.held_push
    await drive(net, client, all_in, limit_us=60_000)
    assert got_events == events
    assert [(p.packet, p.address, p.port) for p in got_packets] == packets
    assert engine.reads["CONTROL_LENGTH"] >= len(packets)
    assert client.held_push - held == 2  # 248 events and every packet, then the other 52 events


@cocotb.test()
async def test_a_push_holds_the_control_packets_that_fit_its_limit_and_a_larger_one_alone(dut):
    """PUSH_LIMIT (the host link's MTU, in words) bounds what a push holds: control packets
    join it in order while they fit; one larger than the room goes alone, never held for
    ever. Each is popped once."""
    engine, net, client = await setup(dut, seed=6)
    await drive(net, client, lambda: True)
    request = client.submit(F.Type.REGISTERS, registers(F.Operation(F.Opcode.WRITE, ADDRESS["PUSH_TIMEOUT"], 2000),
                                                        F.Operation(F.Opcode.WRITE, ADDRESS["PUSH_LIMIT"], F.PUSH_LEAST)))
    await drive(net, client, lambda: request.reply is not None)
    sizes = [40, 700, 60, 60, 1200, 20]
    packets = [(bytes([n]) * size, 0x0A000000 + n, 2998) for n, size in enumerate(sizes)]
    engine.packets.extend(packets)
    groups: list[list[int]] = []
    taken = client.pushed_body

    def grouped(body) -> None:
        groups.append([p.packet[0] for p in F.decode_events(body)[1]])
        taken(body)

    client.pushed_body = grouped
    await drive(net, client, lambda: sum(map(len, groups)) == len(sizes), limit_us=60_000)
    # 137 words: the 40-byte packet; the 700 alone; both 60s; the 1200 alone; the 20.
    assert groups == [[0], [1], [2, 3], [4], [5]], groups
    assert engine.reads["CONTROL_LENGTH"] == len(sizes)


@cocotb.test()
async def test_events_are_pushed_while_uploads_stream_in(dut):
    """A host keeps its window full of UPLOADs for as long as a file takes to go to the
    board (a 64 MiB file over a 100 ms path: 600 ms). Events and the peer's control
    packets waiting meanwhile go out after the request in hand, not after the last upload."""
    engine, net, client = await setup(dut)
    data = bytes(range(256)) * 40
    uploads = [client.submit(*request) for request in F.upload_requests(0, data, 120)]
    await drive(net, client, lambda: sum(r.reply is not None for r in uploads) >= 4)
    engine.events.extend(0x8000_0000 | n for n in range(3))
    engine.packets.append((bytes(24), 0x0A000002, 2998))
    uploaded = engine.values[ADDRESS["UPLOAD_ADDRESS"]]
    got, packets = [], []

    def pushed() -> bool:
        taken = client.take_pushed()
        got.extend(taken.events)
        packets.extend(taken.packets)
        return len(got) == 3 and len(packets) == 1

    await drive(net, client, pushed, limit_us=60_000)
    behind = engine.uploaded_at_event - uploaded
    assert behind <= F.max_words(120), f"events were pushed after {behind} more words of uploads"
    assert sum(r.reply is None for r in uploads) > F.WINDOW  # uploads were still waiting to go
    await drive(net, client, lambda: all(r.reply for r in uploads), limit_us=60_000)
    assert b"".join(w.to_bytes(4, "little") for w in engine.tx[:len(data) // 4]) == data


@cocotb.test()
async def test_status_is_a_snapshot_of_every_register_that_does_not_pop(dut):
    engine, net, client = await setup(dut)
    for r in ENGINE_REGISTERS:
        engine.values[ADDRESS[r.name]] = 0x1000 + ADDRESS[r.name]
    stranger = LinkClient(retry=60e-6)  # anyone may ask for STATUS
    datagram = F.encode(F.Header(F.Type.STATUS, session=stranger.session))
    await net.send(datagram, sport=5555)
    await ClockCycles(dut.clk, 400)
    (reply,) = net.received(5555)
    header, body = F.decode(reply)
    assert header.type == F.Type.STATUS | F.REPLY and header.session == client.session
    words = F.words(body)
    assert words[0] == REGISTER_MAP
    engine_values = words[1:1 + len(ENGINE_REGISTERS)]
    for r, value in zip(ENGINE_REGISTERS, engine_values):
        expected = 0x1000 + ADDRESS[r.name] if r.access in ("r", "rw") else 0
        assert value == expected, r.name
    link = dict(zip((r.name for r in LINK_REGISTERS), words[1 + len(ENGINE_REGISTERS):]))
    assert (link["LINK_SESSION"], link["LINK_OWNER_ADDRESS"], link["LINK_OWNER_PORT"]) == (
        client.session, HOST_INT, HOST_PORT)
    assert link["IP_ADDRESS"] == BOARD_INT and link["REGISTER_MAP"] == REGISTER_MAP
    assert engine.reads["EVENT"] == 0 and engine.reads["CONTROL_LENGTH"] == 0 and engine.reads["DOWNLOAD_DATA"] == 0


@cocotb.test()
async def test_only_the_owner_is_served_and_a_silent_one_can_be_taken_over(dut):
    engine, net, client = await setup(dut)
    intruder = LinkClient(retry=60e-6, give_up=0.002)
    intruder.open()
    try:
        await drive(net, intruder, lambda: intruder.opened, port=6000)
        raise AssertionError("OPEN from another host was accepted")
    except LinkError as exc:
        assert "in use by 192.168.1.2:40990" in str(exc)
    forged = F.encode(F.Header(F.Type.REGISTERS, id=1, session=client.session),
                      registers(F.Operation(F.Opcode.WRITE, ADDRESS["ARG1"], 7)))
    await net.send(forged, sport=6000)
    await ClockCycles(dut.clk, 200)
    (answer,) = net.received(6000)
    assert F.decode(answer)[0].status == F.Status.NOT_OWNER and engine.values[ADDRESS["ARG1"]] == 0
    request = client.submit(F.Type.REGISTERS, registers(F.Operation(F.Opcode.WRITE, ADDRESS["TAKEOVER_AFTER"], 1)))
    await drive(net, client, lambda: request.reply is not None)
    await ClockCycles(dut.clk, 150_000)  # the owner silent for 3 ms
    taker = LinkClient(retry=60e-6)
    taker.open(take_over=True)
    await drive(net, taker, lambda: taker.opened, port=6001)
    stale = client.submit(F.Type.REGISTERS, registers(F.Operation(F.Opcode.READ, ADDRESS["ARG1"])))
    try:
        await drive(net, client, lambda: stale.reply is not None)
        raise AssertionError("the old owner was still served")
    except LinkError as exc:
        assert "lost this session" in str(exc)


@cocotb.test()
async def test_a_take_over_of_an_owner_still_talking_is_refused(dut):
    """TAKE_OVER replaces only an owner silent for TAKEOVER_AFTER: one mid-transfer keeps the board."""
    engine, net, client = await setup(dut)
    taker = LinkClient(retry=60e-6, give_up=0.002)
    taker.open(take_over=True)
    try:
        await drive(net, taker, lambda: taker.opened, port=6002)
        raise AssertionError("a take-over of an owner still talking was accepted")
    except LinkError as exc:
        assert "in use by 192.168.1.2:40990" in str(exc)
    request = client.submit(F.Type.REGISTERS, registers(F.Operation(F.Opcode.WRITE, ADDRESS["ARG1"], 9)))
    await drive(net, client, lambda: request.reply is not None)
    assert engine.values[ADDRESS["ARG1"]] == 9


@cocotb.test()
async def test_a_reset_board_is_reported(dut):
    engine, net, client = await setup(dut)
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    request = client.submit(F.Type.REGISTERS, registers(F.Operation(F.Opcode.READ, ADDRESS["ARG1"])))
    try:
        await drive(net, client, lambda: request.reply is not None)
        raise AssertionError("a reset board answered as if nothing happened")
    except LinkError as exc:
        assert "lost this session: it was reset or reloaded" in str(exc)


@cocotb.test()
async def test_the_engines_packets_pass_whole_both_ways(dut):
    engine, net, client = await setup(dut)
    rng = random.Random(6)
    outgoing = [bytes(rng.randrange(256) for _ in range(4 * rng.randrange(8, 200))) for _ in range(20)]
    incoming = [bytes(rng.randrange(256) for _ in range(rng.randrange(30, 400))) for _ in range(20)]

    async def engine_sends():
        for raw in outgoing:
            await net.engine_tx.send(to_beats(raw, 4, address=0x0A000002, protocol=L.IP_PROTOCOL, length=len(raw)))

    async def wan_sends():
        for raw in incoming:
            await net.source.send(to_beats(raw, 4, address=0x0A000002, protocol=L.IP_PROTOCOL, length=len(raw)))

    cocotb.start_soon(engine_sends())
    cocotb.start_soon(wan_sends())
    requests = [client.submit(F.Type.DOWNLOAD, (200).to_bytes(4, "big"), 0) for _ in range(10)]
    await drive(net, client, lambda: all(r.reply for r in requests), limit_us=60_000)
    await ClockCycles(dut.clk, 2000)
    sent = [beat_bytes(beats, 4) for _, beats in net.sink.packets() if beats[0]["protocol"] == L.IP_PROTOCOL]
    assert sent == outgoing
    assert [beat_bytes(beats, 4) for _, beats in net.engine_rx.packets()] == incoming
