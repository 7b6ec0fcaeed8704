"""cocotb tests of the integrated top (hw/node.py on GMII): real Ethernet frames only.

cocotbext-eth's GMII models stand on the wire; scapy builds and parses the frames as an
independent implementation would, and every frame of a test goes to a pcap under
build/gateware/pcap/ for Wireshark. The testbench reaches the engine's registers as a
host does, in management datagrams (driver/management.py).
"""

from __future__ import annotations

import ipaddress

import cocotb
from cocotb.triggers import ClockCycles, with_timeout
from cocotbext.eth import GmiiFrame
from scapy.layers.inet import ICMP, IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import checksum

from netblt.driver import management as M
from netblt.gateware.control import FLAG_DATA_CHECKSUM, FLAG_UDP
from netblt.gateware.pattern import pattern_bytes
from netblt.gateware.registers import ADDRESS, RECEIVED_FLAGS, Command, Event
from netblt.host import codec, packets
from netblt.hw.liteeth_core import IP_ADDRESS, MAC_ADDRESS
from netblt.sim.ethernet_wire import (HOST_IP, HOST_MAC, ManagementPort, Wire, ip_checksum_holds,
                                      udp_payload)
from netblt.sim.register_host import RegisterHost


@cocotb.test()
async def test_arp_request_is_answered(dut):
    wire = await Wire.create(dut, "arp")
    await wire.send(Ether(dst="ff:ff:ff:ff:ff:ff", src=HOST_MAC) / ARP(
        op=1, hwsrc=HOST_MAC, psrc=HOST_IP, pdst=IP_ADDRESS))
    reply = await wire.receive()
    assert ARP in reply and reply[ARP].op == 2, reply.summary()
    assert (reply[ARP].hwsrc, reply[ARP].psrc) == (MAC_ADDRESS, IP_ADDRESS)
    assert (reply[ARP].hwdst, reply[ARP].pdst) == (HOST_MAC, HOST_IP)
    assert (reply.dst, reply.src) == (HOST_MAC, MAC_ADDRESS)


@cocotb.test()
async def test_ping_is_answered(dut):
    wire = await Wire.create(dut, "ping")
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


async def connect(dut, wire: Wire, *, udp: bool) -> RegisterHost:
    """The engine's connection registers, as the host driver sets them, peer = the wire."""
    host = RegisterHost(dut, ManagementPort(wire))
    await host.configure(PACKET_SIZE=PACKET, LOCAL_PORT=LOCAL_PORT, PEER_PORT=PEER_PORT,
                         PEER_ADDRESS=int(ipaddress.IPv4Address(HOST_IP)),
                         UDP_LOCAL_PORT=UDP_LOCAL_PORT, UDP_PEER_PORT=UDP_PEER_PORT,
                         FLAGS=udp << FLAG_UDP | 1 << FLAG_DATA_CHECKSUM)
    return host


@cocotb.test()
async def test_sent_buffer_arrives_as_valid_frames(dut):
    """A pattern buffer leaves as Ethernet/IPv4 frames (native, then in UDP) that scapy
    and the host codec both accept, with every byte of the buffer in order."""
    wire = await Wire.create(dut, "send")
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


@cocotb.test()
async def test_frames_are_reassembled_into_their_slot(dut):
    """DATA frames from the wire, out of order with a duplicate, fill the posted slot."""
    wire = await Wire.create(dut, "receive")
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
        await host.command(Command.CHECK, slot, buffer, length)
        assert (await host.wait_for(Event.CHECKED))[1:4:2] == (slot, 0)
        await host.write("STATUS_SLOT", slot)
        assert await host.read("SLOT_RECEIVED") == 4
        assert await host.read("RX_ACCEPTED") == 4
        assert await host.read("RX_DUPLICATES") == 1


@cocotb.test()
async def test_short_control_packet_reaches_the_host(dut):
    """A control packet short enough for Ethernet padding reaches the host's FIFO whole."""
    wire = await Wire.create(dut, "control")
    host = await connect(dut, wire, udp=False)
    message = codec.encode(packets.Control((packets.Go(5, 2),)), PEER_PORT, LOCAL_PORT)
    frame = Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(src=HOST_IP, dst=IP_ADDRESS, proto=30) / message
    assert len(bytes(frame)) < 60, "the frame must need padding"
    await wire.send(frame)
    await ClockCycles(dut.clk, 200)
    assert await host.read("CONTROL_LENGTH") == len(message)
    words = [await host.read("CONTROL_DATA") for _ in range(len(message) // 4)]
    assert b"".join(w.to_bytes(4, "little") for w in words) == message


@cocotb.test()
async def test_frame_with_bad_fcs_is_dropped(dut):
    """Without data checksums only the FCS guards the data: a frame LiteEth flags is
    counted and dropped, and the same frame sent intact is accepted."""
    wire = await Wire.create(dut, "bad_fcs")
    host = await connect(dut, wire, udp=False)
    await host.write("FLAGS", 0)
    await host.command(Command.POST, 0, 3)
    netblt = codec.encode(packets.Data(3, 0, 0, pattern_bytes(3, 200), True), PEER_PORT, LOCAL_PORT)
    frame = bytes(Ether(dst=MAC_ADDRESS, src=HOST_MAC) / IP(src=HOST_IP, dst=IP_ADDRESS, proto=30) / netblt)
    good = GmiiFrame.from_payload(frame)
    bad = GmiiFrame.from_raw_payload(bytes(good.data[8:-4]) + bytes(4 * [0x55]))
    wire.record(Ether(frame))
    await wire.source.send(bad)
    await ClockCycles(dut.clk, 200)
    assert await host.read("RX_ACCEPTED") == 0
    assert await host.read("DROPPED_FRAME") == 1
    await wire.source.send(good)
    await ClockCycles(dut.clk, 200)
    assert await host.read("RX_ACCEPTED") == 1


@cocotb.test()
async def test_management_request_runs_whole(dut):
    """One datagram of several operations: writes land, reads return, and an unknown
    opcode comes back not done; the reply is the request's mirror (scapy checks it)."""
    wire = await Wire.create(dut, "management")
    port = ManagementPort(wire)
    ops = [M.Operation(M.Opcode.WRITE, ADDRESS["PEER_PORT"], 1234),
           M.Operation(M.Opcode.WRITE, ADDRESS["PEER_ADDRESS"], 0xC0A8_0102),
           M.Operation(M.Opcode.READ, ADDRESS["PEER_PORT"]),
           M.Operation(M.Opcode.READ, ADDRESS["PEER_ADDRESS"]),
           M.Operation(M.Opcode.DROPPED, 0)]
    assert await port.transact(ops) == [1234, 0xC0A8_0102, 1234, 0xC0A8_0102, 0]
    request = M.encode_request(77, [M.Operation(9, ADDRESS["PEER_PORT"], 5)])
    await wire.send(port.frame(request))
    reply = udp_payload(await with_timeout(wire.replies.get(), 200, "us"))
    assert reply == request, "an unknown opcode is returned untouched, without DONE"
    largest = [M.Operation(M.Opcode.READ, ADDRESS["PEER_PORT"])] * M.MAX_OPERATIONS
    assert await port.transact(largest) == [1234] * M.MAX_OPERATIONS


@cocotb.test()
async def test_management_drops_bad_requests(dut):
    """A request that is malformed, too long or fails its frame check changes nothing
    and is counted; the count is readable, and a good request still works after."""
    wire = await Wire.create(dut, "management_bad")
    port = ManagementPort(wire)
    write = M.encode_request(1, [M.Operation(M.Opcode.WRITE, ADDRESS["PEER_PORT"], 7)])
    too_long = M.encode_request(2, [M.Operation(M.Opcode.WRITE, ADDRESS["PEER_PORT"], 8)] * M.MAX_OPERATIONS)
    bad = [write[:-1], write + b"\0\0\0\0", too_long + write[4:]]
    for payload in bad:
        await wire.send(port.frame(payload))
    # The written value damaged on the wire: the FCS fails, and the frame is short
    # enough to be padded, where LiteEth can lose the FCS error; the UDP checksum holds.
    intact = GmiiFrame.from_payload(bytes(port.frame(write)))
    damaged = bytearray(intact.data[8:])
    damaged[14 + 20 + 8 + len(write) - 1] ^= 0x01
    await wire.source.send(GmiiFrame.from_raw_payload(bytes(damaged)))
    await ClockCycles(dut.clk, 400)
    counted = await port.transact([M.Operation(M.Opcode.DROPPED, 0),
                                   M.Operation(M.Opcode.READ, ADDRESS["PEER_PORT"])])
    assert counted == [len(bad) + 1, 0]
    assert wire.replies.empty() and wire.frames.empty(), "nothing answered a bad request"
