"""The golden vectors read by an independent parser: scapy, with layers written from RFC 998."""

from scapy.fields import ByteEnumField, ByteField, IntField, ShortField, XShortField
from scapy.packet import Packet
from scapy.utils import checksum

TYPES = {0: "OPEN", 1: "RESPONSE", 2: "KEEPALIVE", 3: "QUIT", 4: "QUITACK", 5: "ABORT", 6: "DATA",
         7: "LDATA", 8: "NULL_ACK", 9: "CONTROL", 10: "REFUSED", 11: "DONE"}


class Netblt(Packet):
    name = "NETBLT"
    fields_desc = [XShortField("chksum", 0), ByteField("version", 2), ByteEnumField("type", 0, TYPES),
                   ShortField("length", 12), ShortField("lport", 0), ShortField("fport", 0),
                   ShortField("pad", 0)]


class NetbltData(Packet):
    name = "NETBLT DATA"
    fields_desc = [IntField("buffer", 0), ShortField("high_ack", 0), ShortField("packet", 0),
                   XShortField("data_chksum", 0), ShortField("flags", 0)]


class NetbltOpen(Packet):
    name = "NETBLT OPEN"
    fields_desc = [IntField("uid", 0), IntField("buffer_size", 0), IntField("transfer_size", 0),
                   ShortField("packet_size", 0), ShortField("burst_size", 0), ShortField("burst_rate", 0),
                   ShortField("death_timer", 0), ShortField("flags", 0), ShortField("max_buffers", 0)]


def test_vector_header_and_checksum_under_scapy(vector):
    wire = bytes.fromhex(vector["hex"])
    header = Netblt(wire)
    assert header.version == 2
    assert TYPES[header.type] == vector["fields"]["type"]
    assert (header.lport, header.fport) == (vector["local_port"], vector["foreign_port"])
    data = header.type in (6, 7)
    # RFC 998: the checksum covers the whole packet, or the 24-byte header of DATA/LDATA.
    assert checksum(wire[:24] if data else wire[:header.length]) == 0
    if data:
        body = NetbltData(wire[12:24])
        f = vector["fields"]
        assert (body.buffer, body.packet, body.high_ack) == (f["buffer"], f["packet"], f["high_ack"])
        assert body.flags & 1 == f["last_buffer"]
        payload = wire[24:header.length]
        assert payload.hex() == f["payload"]
        assert body.data_chksum == (checksum(payload) if vector["data_checksum"] else 0)
    if header.type in (0, 1):
        body = NetbltOpen(wire[12:36])
        f = vector["fields"]
        assert (body.uid, body.buffer_size, body.packet_size, body.burst_rate, body.max_buffers) == (
            f["uid"], f["buffer_size"], f["packet_size"], f["burst_interval"], f["max_buffers"])
        assert bool(body.flags & 2) == f["data_checksum"] and bool(body.flags & 1) == f["write_mode"]
