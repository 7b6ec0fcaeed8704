"""cocotb tests of the integrated top (hw/node.py on GMII): real Ethernet frames only.

cocotbext-eth's GMII models stand on the wire; scapy builds and parses the frames as an
independent implementation would, and every frame of a test goes to a pcap under
build/gateware/pcap/ for Wireshark. The testbench reaches the engine as a host does,
over the host link with driver/link.py's own client (sim/rtl/ethernet_wire.py LinkPort).
"""

from __future__ import annotations

import ipaddress
import random

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.eth import GmiiFrame
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import checksum

from netblt.formats import host_link as F
from netblt.formats.pattern import pattern_bytes
from netblt.formats.registers import CONNECTION_FLAGS, ADDRESS, RECEIVED_FLAGS, REGISTER_MAP, Command, Event
from netblt.protocol import codec, packets
from netblt.formats.boards import IP_ADDRESS, MAC_ADDRESS
from netblt.sim.rtl.ethernet_wire import HOST_IP, HOST_LINK_PORT, HOST_MAC, LinkPort, GmiiWire, ip_checksum_holds
from netblt.sim.rtl.register_host import RegisterHost
from netblt.sim.rtl.testbench import CONFIG


@cocotb.test()
async def test_arp_request_is_answered(dut):
    wire = await GmiiWire.create(dut, "arp")
    await wire.send(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC) / ARP(
        op=1, hwsrc=HOST_MAC, psrc=HOST_IP, pdst=IP_ADDRESS))
    reply = await wire.receive()
    assert ARP in reply and reply[ARP].op == 2, reply.summary()
    assert (reply[ARP].hwsrc, reply[ARP].psrc) == (MAC_ADDRESS, IP_ADDRESS)
    assert (reply[ARP].hwdst, reply[ARP].pdst) == (HOST_MAC, HOST_IP)
    assert (reply.dst, reply.src) == (HOST_MAC, MAC_ADDRESS)


@cocotb.test()
async def test_ping_is_answered(dut):
    wire = await GmiiWire.create(dut, "ping")
    payload = bytes(range(56))
    await wire.send(Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(src=HOST_IP, dst=IP_ADDRESS)
                    / ICMP(type=8, id=0x1234, seq=7) / payload)
    reply = await wire.receive()
    assert ICMP in reply and reply[ICMP].type == 0, reply.summary()
    assert (reply[IP].src, reply[IP].dst) == (IP_ADDRESS, HOST_IP)
    assert (reply[ICMP].id, reply[ICMP].seq) == (0x1234, 7)
    assert bytes(reply[ICMP].payload) == payload
    assert ip_checksum_holds(reply)
    assert checksum(bytes(reply[ICMP])) == 0


LOCAL_PORT, PEER_PORT = 2998, 40001
UDP_LOCAL_PORT, UDP_PEER_PORT = 2998, 2999
PACKET = 1024


async def connect(dut, wire: GmiiWire, *, udp: bool) -> RegisterHost:
    """The engine's connection registers, as the host driver sets them, peer = the wire."""
    host = RegisterHost(dut, LinkPort(wire))
    await host.configure(PACKET_SIZE=PACKET, LOCAL_PORT=LOCAL_PORT, PEER_PORT=PEER_PORT,
                         PEER_ADDRESS=int(ipaddress.IPv4Address(HOST_IP)),
                         UDP_LOCAL_PORT=UDP_LOCAL_PORT, UDP_PEER_PORT=UDP_PEER_PORT,
                         FLAGS=CONNECTION_FLAGS.pack(udp=udp, data_checksum=1))
    return host


@cocotb.test()
async def test_sent_buffer_arrives_as_valid_frames(dut):
    """A pattern buffer leaves as Ethernet/IPv4 frames (native, then in UDP) that scapy
    and the host codec both accept, with every byte of the buffer in order."""
    wire = await GmiiWire.create(dut, "send")
    for udp, buffer in ((False, 41), (True, 42)):
        host = await connect(dut, wire, udp=udp)
        length = 3 * PACKET + 100
        await host.command(Command.FILL, 1, buffer, length)
        await host.wait_for(Event.FILLED)
        await host.command(Command.SEND, 1, buffer, length)
        received = b""
        for number in range(4):
            frame = await wire.receive()
            assert (frame.dst, frame.src) == (HOST_MAC, MAC_ADDRESS)
            assert (frame[IP].src, frame[IP].dst) == (IP_ADDRESS, HOST_IP)
            assert ip_checksum_holds(frame)
            if udp:
                assert frame[IP].proto == 17 and UDP in frame
                assert (frame[UDP].sport, frame[UDP].dport) == (UDP_LOCAL_PORT, UDP_PEER_PORT)
                netblt = bytes(frame[UDP].payload)
            else:
                assert frame[IP].proto == 30
                netblt = bytes(frame[IP].payload)
            decoded = codec.decode(netblt, data_checksum=True)
            data = decoded.packet
            assert (decoded.local_port, decoded.foreign_port) == (LOCAL_PORT, PEER_PORT)
            assert (data.buffer, data.packet, data.ldata) == (buffer, number, number == 3)
            received += data.payload
        assert received == pattern_bytes(buffer, length)


ROUTER_IP, ROUTER_MAC, FAR_PEER = "192.168.1.1", "02:00:00:00:00:01", "10.9.8.7"


class RoutedWire(GmiiWire):
    """A LAN with a router on it: ARP requests for the router are answered."""

    async def arrived(self, packet: Ether) -> None:
        if ARP in packet and packet[ARP].op == 1 and packet[ARP].pdst == ROUTER_IP:
            await self.send(Ether(dst=packet.src, src=ROUTER_MAC) / ARP(
                op=2, hwsrc=ROUTER_MAC, psrc=ROUTER_IP, hwdst=packet.src, pdst=packet[ARP].psrc))
        else:
            await super().arrived(packet)


@cocotb.test()
async def test_a_peer_beyond_the_subnet_is_reached_through_the_gateway(dut):
    """DATA to a peer outside NETMASK goes to GATEWAY's MAC address (LiteEth alone would
    ARP for the peer itself and never reach it); the host on the subnet is still ARPed."""
    wire = await RoutedWire.create(dut, "gateway")
    host = await connect(dut, wire, udp=True)
    await host.configure(PEER_ADDRESS=int(ipaddress.IPv4Address(FAR_PEER)),
                         GATEWAY=int(ipaddress.IPv4Address(ROUTER_IP)))
    assert await host.read("NETMASK") == 0xFFFF_FF00
    await host.command(Command.FILL, 0, 5, PACKET)
    await host.wait_for(Event.FILLED)
    await host.command(Command.SEND, 0, 5, PACKET)
    frame = await wire.receive()
    assert (frame.dst, frame[IP].dst, frame[UDP].dport) == (ROUTER_MAC, FAR_PEER, UDP_PEER_PORT)
    asked = {address for _, address in wire.asked}
    assert FAR_PEER not in asked and ROUTER_IP in asked and HOST_IP in asked


@cocotb.test()
async def test_frames_are_reassembled_into_their_slot(dut):
    """DATA frames from the wire, out of order with a duplicate, fill the posted slot."""
    wire = await GmiiWire.create(dut, "receive")
    for udp, (slot, buffer) in ((False, (0, 7)), (True, (1, 8))):
        host = await connect(dut, wire, udp=udp)
        length = 3 * PACKET + 100
        await host.write("COUNTERS_CLEAR", 1)
        await host.command(Command.POST, slot, buffer)
        body = pattern_bytes(buffer, length)
        order = [2, 0, 3, 0, 1]
        for number in order:
            chunk = body[number * PACKET:(number + 1) * PACKET]
            netblt = codec.encode(packets.Data(buffer, number, 0, chunk, number == 3), PEER_PORT, LOCAL_PORT,
                                  data_checksum=True)
            carried = (UDP(sport=UDP_PEER_PORT, dport=UDP_LOCAL_PORT, chksum=0) / netblt if udp else netblt)
            await wire.send(Ether(dst=MAC_ADDRESS, src=HOST_MAC)
                            / IP(src=HOST_IP, dst=IP_ADDRESS, proto=17 if udp else 30) / carried)
        while not RECEIVED_FLAGS.unpack((await host.wait_for(Event.RECEIVED))[2])["complete"]:
            pass
        await host.command(Command.DRAIN, slot, buffer, length)
        assert (await host.wait_for(Event.DRAINED))[1:4:2] == (slot, 0)
        await host.write("STATUS_SLOT", slot)
        assert await host.read("SLOT_RECEIVED") == 4
        assert await host.read("RX_ACCEPTED") == 4
        assert await host.read("RX_DUPLICATES") == 1


@cocotb.test()
async def test_short_control_packet_reaches_the_host(dut):
    """A control packet short enough for Ethernet padding reaches the host's FIFO whole."""
    wire = await GmiiWire.create(dut, "control")
    host = await connect(dut, wire, udp=False)
    message = codec.encode(packets.Control((packets.Go(5, 2),)), PEER_PORT, LOCAL_PORT)
    frame = Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(src=HOST_IP, dst=IP_ADDRESS, proto=30) / message
    assert len(bytes(frame)) < 60, "the frame must need padding"
    await wire.send(frame)
    port = host.port
    await port.until(lambda: port.packets)  # pushed to the host, not fetched
    (pushed,) = port.packets
    assert (pushed.packet, pushed.address) == (message, int(ipaddress.IPv4Address(HOST_IP)))


def lone_ldata_frame(buffer: int, padding: int = 0) -> bytes:
    """A native frame holding a buffer's one packet (200 bytes, LDATA), its IP datagram
    padded by ``padding`` bytes past the NETBLT packet."""
    netblt = codec.encode(packets.Data(buffer, 0, 0, pattern_bytes(buffer, 200), True), PEER_PORT, LOCAL_PORT)
    return bytes(Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(src=HOST_IP, dst=IP_ADDRESS, proto=30)
                 / (netblt + bytes(padding)))


@cocotb.test()
async def test_frame_with_bad_fcs_is_dropped(dut):
    """Without data checksums only the FCS guards the data: a frame LiteEth flags is
    counted and dropped, and the same frame sent intact is accepted; at each of the four
    places a frame's last byte can fall in a word (the IP datagram padded past the NETBLT
    packet by 0 to 3 bytes, as a sender may): LiteEth's depacketizer lost the flag at two
    of them (hw/liteeth_core.py keep_frame_errors)."""
    wire = await GmiiWire.create(dut, "bad_fcs")
    host = await connect(dut, wire, udp=False)
    await host.write("FLAGS", 0)
    for buffer, padding in enumerate(range(4), start=3):
        await host.command(Command.POST, 0, buffer)
        frame = lone_ldata_frame(buffer, padding)
        good = GmiiFrame.from_payload(frame)
        bad = GmiiFrame.from_raw_payload(bytes(good.data[8:-4]) + bytes(4 * [0x55]))
        await host.write("COUNTERS_CLEAR", 1)
        wire.record(Ether(frame))
        await wire.source.send(bad)
        await ClockCycles(dut.clk, 200)
        assert (await host.read("RX_ACCEPTED"), await host.read("DROPPED_FRAME")) == (0, 1), f"{len(frame)} bytes"
        await wire.source.send(good)
        await ClockCycles(dut.clk, 200)
        assert await host.read("RX_ACCEPTED") == 1
        await host.command(Command.RELEASE, 0)


@cocotb.test()
async def test_a_spliced_frame_is_dropped(dut):
    """Bytes are lost ahead of LiteEth's receive clock crossing when the engine falls behind:
    the head of one frame runs on into the tail of the next. Its FCS fails, but were that flag lost
    (LiteEth lost it at two of a word's four ends), a splice longer than its IP datagram is
    still no padded frame: counted and dropped, never trimmed to the IP length and accepted
    with the next frame's bytes in it. (Sent here with an FCS that holds.)"""
    wire = await GmiiWire.create(dut, "spliced")
    host = await connect(dut, wire, udp=False)
    await host.write("FLAGS", 0)
    await host.command(Command.POST, 0, 3)
    sent = [lone_ldata_frame(buffer) for buffer in (3, 4)]
    spliced = sent[0][:150] + sent[1][100:]  # longer than the first, whose headers lead it
    assert len(spliced) > len(sent[0])
    wire.record(Ether(spliced))
    await wire.source.send(GmiiFrame.from_payload(spliced))
    await ClockCycles(dut.clk, 200)
    assert await host.read("RX_ACCEPTED") == 0
    assert await host.read("DROPPED_FRAME") == 1
    await wire.send(Ether(sent[0]))
    await ClockCycles(dut.clk, 200)
    assert await host.read("RX_ACCEPTED") == 1


@cocotb.test()
async def test_link_request_runs_whole(dut):
    """One request of many operations: writes land, reads return, an unknown opcode comes
    back not done, and the largest request fits."""
    wire = await GmiiWire.create(dut, "link_request")
    port = LinkPort(wire)
    ops = [F.Operation(F.Opcode.WRITE, ADDRESS["PEER_PORT"], 1234),
           F.Operation(F.Opcode.WRITE, ADDRESS["PEER_ADDRESS"], 0xC0A8_0102),
           F.Operation(F.Opcode.READ, ADDRESS["PEER_PORT"]),
           F.Operation(F.Opcode.READ, ADDRESS["PEER_ADDRESS"]),
           F.Operation(F.Opcode.READ, ADDRESS["REGISTER_MAP"]),
           F.Operation(9, ADDRESS["PEER_PORT"], 5)]
    await port.open()
    request = port.client.submit(F.Type.REGISTERS, F.encode_operations(ops))
    await port.until(lambda: request.reply is not None)
    done = F.decode_operations(request.reply[1])
    assert [op.value for op in done] == [1234, 0xC0A8_0102, 1234, 0xC0A8_0102, REGISTER_MAP, 5]
    assert [op.opcode for op in done] == [0x81, 0x81, 0x82, 0x82, 0x82, 9]
    largest = [F.Operation(F.Opcode.READ, ADDRESS["PEER_PORT"])] * F.MAX_OPERATIONS
    assert await port.transact(largest) == [1234] * F.MAX_OPERATIONS


@cocotb.test()
async def test_hostile_datagrams_change_nothing(dut):
    """Garbage, a datagram cut short, one damaged where only the UDP checksum can tell, a
    replayed ID with other content, a forgery from another host: counted, none executed,
    and the owner's session goes on."""
    wire = await GmiiWire.create(dut, "link_hostile")
    port = LinkPort(wire)
    await port.write(ADDRESS["PEER_PORT"], 7)
    first = port.client.session, 1  # the session and the ID of that write
    garbage = bytes(range(40))
    cut = F.encode(F.Header(F.Type.REGISTERS, id=2, session=first[0]))[:10]
    for payload in (garbage, cut):
        await wire.send(port.frame(payload))
    write = F.encode(F.Header(F.Type.REGISTERS, id=2, session=first[0]),
                     F.encode_operations([F.Operation(F.Opcode.WRITE, ADDRESS["PEER_PORT"], 8)]))
    intact = GmiiFrame.from_payload(bytes(port.frame(write)))
    damaged = bytearray(intact.data[8:])
    damaged[14 + 20 + 8 + len(write) - 1] ^= 0x01  # the FCS fails too, but the frame is padded
    await wire.source.send(GmiiFrame.from_raw_payload(bytes(damaged)))
    replayed = F.encode(F.Header(F.Type.REGISTERS, id=first[1], session=first[0]),
                        F.encode_operations([F.Operation(F.Opcode.WRITE, ADDRESS["PEER_PORT"], 9)]))
    await wire.send(port.frame(replayed))
    intruder = LinkPort(wire, port=HOST_LINK_PORT + 1)
    await wire.send(intruder.frame(F.encode(F.Header(F.Type.REGISTERS, id=2, session=first[0]),
                                            F.encode_operations([F.Operation(F.Opcode.WRITE, ADDRESS["PEER_PORT"], 10)]))))
    await ClockCycles(dut.clk, 600)
    counted = await port.transact([F.Operation(F.Opcode.READ, ADDRESS[name]) for name in
                                   ("PEER_PORT", "LINK_DROPPED", "LINK_REPLAYED", "LINK_REFUSED", "LINK_EXECUTED")])
    assert counted == [7, 3, 1, 1, 2]  # garbage (version), cut short, damaged; the replay; the forgery


async def whole_slots(dut, wire: GmiiWire, loss: float, seed: int, duplicate: float = 0.0, reorder: float = 0.0,
                      mtu: int = 1500) -> None:
    """A whole transmit slot uploaded and sent to the wire, a whole receive slot filled
    from the wire and downloaded: byte-exact; each command once, each event once."""
    port = LinkPort(wire, loss=loss, duplicate=duplicate, reorder=reorder, seed=seed)
    host = RegisterHost(dut, port)
    await host.configure(PACKET_SIZE=PACKET, LOCAL_PORT=LOCAL_PORT, PEER_PORT=PEER_PORT,
                         PEER_ADDRESS=int(ipaddress.IPv4Address(HOST_IP)), FLAGS=CONNECTION_FLAGS.pack(data_checksum=1),
                         COUNTERS_CLEAR=1)
    rng = random.Random(seed)
    slot_bytes = CONFIG.slot_bytes
    data = bytes(rng.randrange(256) for _ in range(slot_bytes))
    await port.upload(slot_bytes // 4, data, mtu)
    await host.command(Command.SEND, 1, 77, slot_bytes)
    received = b""
    for number in range(slot_bytes // PACKET):
        frame = await wire.receive(timeout_us=5000)
        packet = codec.decode(bytes(frame[IP].payload), data_checksum=True).packet
        assert (packet.buffer, packet.packet) == (77, number)
        received += packet.payload
    assert received == data
    assert (await host.wait_for(Event.SENT))[1] == 1
    body = pattern_bytes(9, slot_bytes)
    await host.command(Command.POST, 0, 9)
    for number in range(slot_bytes // PACKET):
        netblt = codec.encode(packets.Data(9, number, 0, body[number * PACKET:(number + 1) * PACKET],
                                           number == slot_bytes // PACKET - 1), PEER_PORT, LOCAL_PORT, data_checksum=True)
        await wire.send(Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(src=HOST_IP, dst=IP_ADDRESS, proto=30) / netblt)
    while not RECEIVED_FLAGS.unpack((await host.wait_for(Event.RECEIVED))[2])["complete"]:
        pass
    replies = await port.many(F.download_requests(0, slot_bytes, mtu))
    assert b"".join(reply for _, reply in replies) == body
    assert len(replies[0][1]) == 4 * min(F.max_words(mtu), slot_bytes // 4)  # each reply one datagram of the MTU
    assert await host.read("TX_PACKETS") == slot_bytes // PACKET  # the SEND ran once
    await host.poll()
    assert not [e for e in host.events if e[0] == Event.SENT]  # and said so once
    assert await host.read("EVENTS_LOST") == 0


@cocotb.test()
async def test_whole_slots_up_and_down(dut):
    await whole_slots(dut, await GmiiWire.create(dut, "link_slots"), 0.0, 1)


@cocotb.test()
async def test_whole_slots_up_and_down_with_5_percent_loss_duplicates_and_reordering(dut):
    await whole_slots(dut, await GmiiWire.create(dut, "link_slots_5"), 0.05, 2, duplicate=0.1, reorder=0.1)


@cocotb.test()
async def test_whole_slots_up_and_down_with_20_percent_loss(dut):
    await whole_slots(dut, await GmiiWire.create(dut, "link_slots_20"), 0.2, 3)


@cocotb.test()
async def test_whole_slots_up_and_down_in_jumbo_frames(dut):
    """9000-byte datagrams: an UPLOAD of 8956 bytes fits the intake whole, a DOWNLOAD
    reply of as many leaves as one frame."""
    wire = await GmiiWire.create(dut, "link_slots_jumbo")
    await whole_slots(dut, wire, 0.0, 4, mtu=9000)


@cocotb.test()
async def test_an_upload_runs_while_the_engine_sends(dut):
    """Slot 1 uploaded while slot 0's pattern leaves at line rate: both byte-exact."""
    wire = await GmiiWire.create(dut, "link_upload_while_sending")
    host = await connect(dut, wire, udp=False)
    port = host.port
    length = CONFIG.slot_bytes
    await host.command(Command.FILL, 0, 5, length)
    await host.wait_for(Event.FILLED)
    await host.write("PACING_MODE", 0)
    await host.command(Command.SEND, 0, 5, length)
    data = bytes(random.Random(4).randrange(256) for _ in range(length))
    await port.upload(length // 4, data)
    received = b""
    for number in range(length // PACKET):
        frame = await wire.receive(timeout_us=5000)
        received += codec.decode(bytes(frame[IP].payload), data_checksum=True).packet.payload
    assert received == pattern_bytes(5, length)
    await host.command(Command.SEND, 1, 6, length)
    received = b""
    for number in range(length // PACKET):
        frame = await wire.receive(timeout_us=5000)
        received += codec.decode(bytes(frame[IP].payload), data_checksum=True).packet.payload
    assert received == data
