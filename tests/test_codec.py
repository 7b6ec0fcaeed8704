import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netblt.formats import rfc998 as L
from netblt.formats.checksum import internet_checksum
from netblt.protocol.codec import CodecError, decode, encode
from netblt.protocol.packets import (
    Abort, Control, Data, Done, Go, KeepAlive, NullAck, Ok, Open, Quit, QuitAck, Refused, Resend, Response,
)

from vectors.generate import PACKETS, fields


def test_vector_decodes_to_its_fields(vector):
    frame = decode(bytes.fromhex(vector["hex"]), data_checksum=vector["data_checksum"])
    assert json.loads(json.dumps(fields(frame.packet))) == vector["fields"]
    assert (frame.local_port, frame.foreign_port) == (vector["local_port"], vector["foreign_port"])


def test_vector_encodes_byte_exact(vector):
    packet = PACKETS[vector["name"]]
    wire = encode(packet, vector["local_port"], vector["foreign_port"], data_checksum=vector["data_checksum"])
    assert wire.hex() == vector["hex"]


def test_every_packet_type_has_a_vector():
    assert {type(p).__name__ for p in PACKETS.values()} >= {
        "Open", "Response", "KeepAlive", "Quit", "QuitAck", "Abort", "Data", "NullAck", "Control",
        "Refused", "Done"}
    assert {p.type for p in PACKETS.values()} == set(L.PacketType)


def test_packets_are_longword_aligned_and_length_is_true_data_length(vector):
    wire = bytes.fromhex(vector["hex"])
    assert len(wire) % 4 == 0
    length = struct.unpack_from(">H", wire, 4)[0]
    assert length <= len(wire) < length + 4


def test_rfc1071_example():
    assert internet_checksum(bytes.fromhex("0001f203f4f5f6f7")) == 0x220D
    assert internet_checksum(b"") == 0xFFFF
    assert internet_checksum(b"\x01") == 0xFEFF  # odd length: padded with a zero byte


def _reseal(wire: bytearray) -> bytes:
    """Recompute the checksum so a test reaches the check it is aimed at."""
    wire[0:2] = b"\0\0"
    wire[0:2] = struct.pack(">H", internet_checksum(wire[:24] if wire[3] in (6, 7) else wire))
    return bytes(wire)


OPEN = encode(PACKETS["open"], 1, 2)
DATA = encode(PACKETS["data"], 1, 2)


@pytest.mark.parametrize("wire, message", [
    (b"", "truncated"),
    (OPEN[:11], "truncated"),
    (_reseal(bytearray(OPEN[:2]) + b"\x05" + OPEN[3:]), "unsupported version 5"),
    (_reseal(bytearray(OPEN[:3]) + b"\x0c" + OPEN[4:]), "unknown packet type 12"),
    (OPEN[:-4], "truncated: length field says"),
    (OPEN + b"\0\0\0\0", "length mismatch"),
    (bytes([OPEN[0] ^ 1]) + OPEN[1:], "bad checksum"),
    (_reseal(bytearray(OPEN[:4]) + struct.pack(">H", 20) + OPEN[6:20]), "too short for OPEN"),
    (_reseal(bytearray(encode(Quit("abc"), 1, 2)[:-1]) + b"x"), "not NUL-terminated"),
    (_reseal(bytearray(encode(Quit("ab"), 1, 2)[:-2]) + b"\0x"), "bad padding"),
    (_reseal(bytearray(encode(KeepAlive(), 1, 2)[:4]) + struct.pack(">H", 16) + bytes(10)), "KEEPALIVE must be 12"),
    (_reseal(bytearray(DATA[:4]) + struct.pack(">H", 23) + DATA[6:24]), "too short for DATA"),
])
def test_hostile_bytes_raise_a_clear_codec_error(wire, message):
    with pytest.raises(CodecError, match=message):
        decode(wire)


def _control(body: bytes) -> bytes:
    wire = bytearray(12) + body
    wire[2], wire[3] = L.VERSION, L.PacketType.CONTROL
    wire[4:6] = struct.pack(">H", len(wire))
    return _reseal(wire)


@pytest.mark.parametrize("body, message", [
    (struct.pack(">BxHI", 7, 1, 1), "unknown control message type 7"),
    (struct.pack(">BxHI", 1, 1, 1), "truncated OK"),
    (struct.pack(">BxHIHH", 2, 1, 1, 5, 0) + bytes(4), "past the end"),
    (struct.pack(">BxH", 0, 1), "truncated control message"),
])
def test_malformed_control_messages(body, message):
    with pytest.raises(CodecError, match=message):
        decode(_control(body))


def test_data_checksum_is_checked_only_when_negotiated():
    wire = bytearray(encode(PACKETS["data_checksum"], 1, 2, data_checksum=True))
    wire[30] ^= 0xFF  # the data, not covered by the header checksum
    assert decode(bytes(wire)).packet.payload != PACKETS["data_checksum"].payload
    with pytest.raises(CodecError, match="bad data checksum"):
        decode(bytes(wire), data_checksum=True)


def test_unpadded_data_is_accepted():
    wire = encode(PACKETS["ldata_last_odd"], 1, 2)
    length = struct.unpack_from(">H", wire, 4)[0]
    assert decode(wire[:length]).packet == PACKETS["ldata_last_odd"]


def test_string_with_nul_cannot_be_encoded():
    with pytest.raises(CodecError, match="NUL"):
        encode(Quit("a\0b"), 1, 2)


def test_out_of_range_field_cannot_be_encoded():
    with pytest.raises(CodecError):
        encode(NullAck(high_ack=1 << 16, burst_size=1, burst_interval=1), 1, 2)


u16, u32 = st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF)
text = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40)
blob = st.binary(max_size=64).filter(lambda b: b"\0" not in b)
setup = dict(uid=u32, buffer_size=u32, packet_size=u16, burst_size=u16, burst_interval=u16,
             death_timer=u16, max_buffers=u16, data_checksum=st.booleans(), write_mode=st.booleans(),
             transfer_size=u32, client_string=blob)
messages = st.lists(st.one_of(
    st.builds(Go, u16, u32), st.builds(Ok, u16, u32, u16, u16, u16),
    st.builds(Resend, u16, u32, st.lists(u16, max_size=20).map(tuple))), max_size=8)
packets = st.one_of(
    st.builds(Open, **setup), st.builds(Response, **setup),
    st.builds(Quit, text), st.builds(Abort, text), st.builds(Refused, text),
    st.just(KeepAlive()), st.just(QuitAck()), st.just(Done()),
    st.builds(Data, u32, u16, u16, st.binary(max_size=300), st.booleans(), st.booleans()),
    st.builds(NullAck, u16, u16, u16), st.builds(Control, messages.map(tuple)))


@given(packets, u16, u16, st.booleans())
def test_round_trip(packet, local_port, foreign_port, checksum):
    frame = decode(encode(packet, local_port, foreign_port, data_checksum=checksum), data_checksum=checksum)
    assert (frame.packet, frame.local_port, frame.foreign_port) == (packet, local_port, foreign_port)


@given(st.binary(max_size=200))
@settings(max_examples=500)
def test_any_bytes_decode_or_raise_codec_error(data):
    try:
        decode(data, data_checksum=True)
    except CodecError:
        pass


def reseal(wire: bytearray) -> bytes:
    """Length field and checksum made right again, so the damage reaches the body parsers."""
    data = wire[3] in (L.PacketType.DATA, L.PacketType.LDATA)
    wire[4:6] = len(wire).to_bytes(2, "big")
    wire[0:2] = b"\0\0"
    wire[0:2] = internet_checksum(bytes(wire[:L.DATA_HEADER_SIZE] if data else wire)).to_bytes(2, "big")
    return bytes(wire)


@given(packets, st.data())
@settings(max_examples=1000)
def test_damaged_bodies_of_valid_packets_decode_or_raise_codec_error(packet, data):
    """Lengths, strings, counts and message lists damaged behind a valid header and checksum:
    decode returns a packet or raises CodecError, nothing else."""
    wire = bytearray(encode(packet, 7, 9))
    words = max(0, (len(wire) - 12) // 2)
    for _ in range(data.draw(st.integers(1, 3))):
        how = data.draw(st.sampled_from(["byte", "word", "cut", "grow", "nul"]))
        if how == "byte" and len(wire) > 12:
            wire[data.draw(st.integers(12, len(wire) - 1))] = data.draw(st.integers(0, 255))
        elif how == "word" and words:  # a count, a length, a type, a sequence number
            at = 12 + 2 * data.draw(st.integers(0, words - 1))
            wire[at:at + 2] = data.draw(st.sampled_from([0, 1, 2, 3, 0x7FFF, 0xFFFF])).to_bytes(2, "big")
        elif how == "cut" and len(wire) > 12:
            del wire[data.draw(st.integers(12, len(wire) - 1)) & ~3:]
        elif how == "grow":
            wire += data.draw(st.binary(min_size=4, max_size=40).map(lambda b: b[:len(b) & ~3]))
        elif how == "nul" and b"\0" in wire[12:]:  # a string loses its terminator
            wire[12 + wire[12:].index(b"\0")] = ord("x")
    try:
        decode(reseal(wire), data_checksum=data.draw(st.booleans()))
    except CodecError:
        pass


@given(packets.filter(lambda p: not isinstance(p, Data)), st.data())
def test_any_single_bit_flip_is_detected(packet, data):
    wire = bytearray(encode(packet, 7, 9))
    bit = data.draw(st.integers(0, len(wire) * 8 - 1))
    wire[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CodecError):
        decode(bytes(wire))
