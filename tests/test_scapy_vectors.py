"""The wire format checked by a parser that shares nothing with the codec.

The scapy layers below are written from RFC 998 section 8 (as tabulated in
../shared/reference/netblt-rfc998.md, section 2), not from formats/rfc998.py: every field of
every packet type, by its own offset and width. They read the golden vectors (written by
the codec), and a few packets are written out here byte by byte, so a layout mistake
cannot hide behind regenerated vectors.
"""

import pytest
from scapy.fields import (
    BitField, ByteEnumField, ByteField, FieldLenField, FieldListField, IntField, PacketListField,
    ShortField, StrField, XShortField,
)
from scapy.packet import Packet
from scapy.utils import checksum

from netblt.protocol.codec import decode, encode
from netblt.protocol.packets import Abort, Control, Data, Go, NullAck, Ok, Open, Refused, Resend, Response

TYPES = {0: "OPEN", 1: "RESPONSE", 2: "KEEPALIVE", 3: "QUIT", 4: "QUITACK", 5: "ABORT", 6: "DATA",
         7: "LDATA", 8: "NULL_ACK", 9: "CONTROL", 10: "REFUSED", 11: "DONE"}
MESSAGES = {0: "GO", 1: "OK", 2: "RESEND"}


class Netblt(Packet):
    """The common header: RFC 998 section 8, 12 bytes."""

    name = "NETBLT"
    fields_desc = [XShortField("chksum", 0), ByteField("version", 2), ByteEnumField("type", 0, TYPES),
                   ShortField("length", 12), ShortField("lport", 0), ShortField("fport", 0),
                   ShortField("pad", 0)]


class NetbltOpen(Packet):
    """OPEN and RESPONSE after the header; the flags word is 14 reserved bits, C, M."""

    name = "NETBLT OPEN"
    fields_desc = [IntField("uid", 0), IntField("buffer_size", 0), IntField("transfer_size", 0),
                   ShortField("packet_size", 0), ShortField("burst_size", 0), ShortField("burst_rate", 0),
                   ShortField("death_timer", 0), BitField("reserved", 0, 14), BitField("C", 0, 1),
                   BitField("M", 0, 1), ShortField("max_buffers", 0), StrField("client", b"")]


class NetbltReason(Packet):
    """QUIT, ABORT and REFUSED after the header: a NUL-terminated, NUL-padded string."""

    name = "NETBLT reason"
    fields_desc = [StrField("reason", b"")]


class NetbltData(Packet):
    name = "NETBLT DATA"
    fields_desc = [IntField("buffer", 0), ShortField("high_ack", 0), ShortField("packet", 0),
                   XShortField("data_chksum", 0), BitField("reserved", 0, 15), BitField("L", 0, 1),
                   StrField("data", b"")]


class NetbltNullAck(Packet):
    name = "NETBLT NULL-ACK"
    fields_desc = [ShortField("high_ack", 0), ShortField("burst_size", 0), ShortField("burst_rate", 0),
                   ShortField("pad", 0)]


class GoMessage(Packet):
    name = "GO"
    fields_desc = [ByteEnumField("type", 0, MESSAGES), ByteField("pad", 0), ShortField("seq", 0),
                   IntField("buffer", 0)]

    def extract_padding(self, s):
        return b"", s


class OkMessage(Packet):
    name = "OK"
    fields_desc = [ByteEnumField("type", 1, MESSAGES), ByteField("pad", 0), ShortField("seq", 0),
                   IntField("buffer", 0), ShortField("burst_size", 0), ShortField("burst_rate", 0),
                   ShortField("control_timer", 0), ShortField("pad2", 0)]

    def extract_padding(self, s):
        return b"", s


class ResendMessage(Packet):
    name = "RESEND"
    fields_desc = [ByteEnumField("type", 2, MESSAGES), ByteField("pad", 0), ShortField("seq", 0),
                   IntField("buffer", 0), FieldLenField("count", None, count_of="packets", fmt="H"),
                   ShortField("pad2", 0),
                   FieldListField("packets", [], ShortField("", 0), count_from=lambda p: p.count)]

    def post_dissect(self, s):
        return s[(2 * self.count) % 4:]  # the packet numbers are padded to a longword

    def extract_padding(self, s):
        return b"", s


def message(data: bytes, **kw) -> Packet:
    return {0: GoMessage, 1: OkMessage, 2: ResendMessage}[data[0]](data, **kw)


class NetbltControl(Packet):
    name = "NETBLT CONTROL"
    fields_desc = [PacketListField("messages", [], next_cls_cb=lambda pkt, lst, cur, remain:
                                   (lambda data: message(data)) if remain else None)]


def string(field: bytes) -> bytes:
    """A NETBLT string: up to the first NUL, with the rest NUL padding to a longword."""
    text, nul, padding = field.partition(b"\0")
    assert nul and set(padding) <= {0} and len(field) % 4 == 0
    return text


def read(wire: bytes) -> tuple[Netblt, Packet | None]:
    header = Netblt(wire[:12])
    body = wire[12:header.length + (-header.length % 4 if header.type not in (6, 7) else 0)]
    layer = {0: NetbltOpen, 1: NetbltOpen, 3: NetbltReason, 5: NetbltReason, 10: NetbltReason,
             6: NetbltData, 7: NetbltData, 8: NetbltNullAck, 9: NetbltControl}.get(header.type)
    if header.type in (6, 7):
        body = wire[12:header.length]
    return header, layer(body) if layer else None


def test_vector_every_field_under_scapy(vector):
    wire = bytes.fromhex(vector["hex"])
    header, body = read(wire)
    f = vector["fields"]
    assert header.version == 2 and TYPES[header.type] == f["type"]
    assert (header.lport, header.fport, header.pad) == (vector["local_port"], vector["foreign_port"], 0)
    data = header.type in (6, 7)
    # RFC 998: the checksum covers the whole packet, or the 24-byte header of DATA/LDATA.
    assert checksum(wire[:24] if data else wire[:header.length]) == 0
    if header.type in (0, 1):
        assert (body.uid, body.buffer_size, body.transfer_size, body.packet_size, body.burst_size,
                body.burst_rate, body.death_timer, body.max_buffers) == (
            f["uid"], f["buffer_size"], f["transfer_size"], f["packet_size"], f["burst_size"],
            f["burst_interval"], f["death_timer"], f["max_buffers"])
        assert (body.C, body.M, body.reserved) == (f["data_checksum"], f["write_mode"], 0)
        assert string(body.client) == bytes.fromhex(f["client_string"])
    elif header.type in (3, 5, 10):
        assert string(body.reason).decode() == f["reason"]
    elif data:
        assert (body.buffer, body.packet, body.high_ack, body.L, body.reserved) == (
            f["buffer"], f["packet"], f["high_ack"], f["last_buffer"], 0)
        assert (header.type == 7) == f["ldata"]
        assert body.data.hex() == f["payload"]
        assert body.data_chksum == (checksum(body.data) if vector["data_checksum"] else 0)
    elif header.type == 8:
        assert (body.high_ack, body.burst_size, body.burst_rate, body.pad) == (
            f["high_ack"], f["burst_size"], f["burst_interval"], 0)
    elif header.type == 9:
        got = []
        for m in body.messages:
            fields = dict(kind=MESSAGES[m.type], seq=m.seq, buffer=m.buffer)
            if m.type == 1:
                fields |= dict(burst_size=m.burst_size, burst_interval=m.burst_rate,
                               control_timer=m.control_timer)
            elif m.type == 2:
                fields |= dict(packets=list(m.packets))
            got.append(fields)
        assert got == [{k: list(v) if isinstance(v, (list, tuple)) else v for k, v in m.items()}
                       for m in f["messages"]]
    else:
        assert header.length == 12 and len(wire) == 12  # KEEPALIVE, QUITACK, DONE


def sealed(*parts: str, data: bool = False) -> bytes:
    """Hex written field by field (checksum as 0000), with its checksum filled in by scapy's."""
    wire = bytearray(bytes.fromhex("".join(parts).replace(" ", "")))
    wire[0:2] = checksum(bytes(wire[:24] if data else wire)).to_bytes(2, "big")
    return bytes(wire)


HAND_WRITTEN = [
    (  # OPEN, WRITE mode, data checksums on, client string "hi"
        sealed("0000 02 00 0028 0bb6 9c41 0000",        # checksum, version 2, OPEN, length 40, ports 2998 -> 40001
               "12345678", "000037f0", "000aece0",      # UID, buffer size 14320, transfer size 716000
               "0598 0005 0037 001e",                   # packet size 1432, burst size 5, burst rate 55 ms, death 30 s
               "0003 0016",                             # flags C|M, 22 outstanding buffers
               "68690000"),                             # "hi", NUL, padding
        Open(uid=0x12345678, buffer_size=14320, packet_size=1432, burst_size=5, burst_interval=55,
             death_timer=30, max_buffers=22, data_checksum=True, write_mode=True, transfer_size=716000,
             client_string=b"hi"), 2998, 40001),
    (  # RESPONSE, READ mode, no data checksum, empty client string
        sealed("0000 02 01 0028 9c41 0bb6 0000", "00000001", "00001000", "00000000",
               "0400 0002 0064 00b4", "0000 0001", "00000000"),
        Response(uid=1, buffer_size=4096, packet_size=1024, burst_size=2, burst_interval=100, death_timer=180,
                 max_buffers=1, data_checksum=False, write_mode=False, transfer_size=0), 40001, 2998),
    (  # CONTROL: OK(seq 41, buffer 6, burst 5 per 55 ms, control timer 1800 ms), GO(42, 29), RESEND(43, 7, 1 4 9)
        sealed("0000 02 09 0038 0bb6 9c41 0000",
               "01 00 0029 00000006 0005 0037 0708 0000",
               "00 00 002a 0000001d",
               "02 00 002b 00000007 0003 0000 0001 0004 0009 0000"),
        Control((Ok(41, 6, 5, 55, 1800), Go(42, 29), Resend(43, 7, (1, 4, 9)))), 2998, 40001),
    (  # NULL-ACK: high-ack 40, burst size 5, burst rate 60 ms
        sealed("0000 02 08 0014 9c41 0bb6 0000", "0028 0005 003c 0000"), NullAck(40, 5, 60), 40001, 2998),
    (  # LDATA of the last buffer: buffer 9, high-ack 65535, packet 2, no data checksum, L set, "tail!"
        sealed("0000 02 07 001d 9c41 0bb6 0000", "00000009 ffff 0002 0000 0001", "7461696c21 000000", data=True),
        Data(buffer=9, packet=2, high_ack=0xFFFF, payload=b"tail!", ldata=True, last_buffer=True), 40001, 2998),
    (  # REFUSED "busy"
        sealed("0000 02 0a 0014 0bb6 9c41 0000", "62757379 00000000"), Refused("busy"), 2998, 40001),
    (  # ABORT with an empty reason
        sealed("0000 02 05 0010 0bb6 9c41 0000", "00000000"), Abort(""), 2998, 40001),
]


@pytest.mark.parametrize("wire, packet, local, foreign", HAND_WRITTEN,
                         ids=[type(p).__name__ for _, p, _, _ in HAND_WRITTEN])
def test_hand_written_packets_match_the_codec_both_ways(wire, packet, local, foreign):
    assert encode(packet, local, foreign) == wire
    frame = decode(wire)
    assert (frame.packet, frame.local_port, frame.foreign_port) == (packet, local, foreign)
