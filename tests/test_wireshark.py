"""The Wireshark dissector (host/wireshark.py), run by tshark over packets of every kind.

tshark comes from Debian's package (``apt-get install tshark``; make test installs it).
Each packet is made by the project's own encoders; what tshark decodes is compared with
the values they were given, field by field, and every malformed kind must be flagged."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from scapy.utils import RawPcapReader, wrpcap

from netblt.bench.long_path_bench import ETHERNET_HEADER, LINKTYPE_ETHERNET, udp
from netblt.formats import host_link as link
from netblt.formats.checksum import internet_checksum
from netblt.formats.rfc998 import HEADER, VERSION, PacketType
from netblt.formats.registers import (
    ADDRESS, COMMAND_WORD, EVENT_WORD, RECEIVED_FLAGS, REGISTER_MAP, Command, Event,
)
from netblt.host.cli import main
from netblt.host.wireshark import lua
from netblt.protocol import codec
from netblt.protocol.packets import (
    Abort, Control, Data, Done, Go, KeepAlive, NullAck, Ok, Open, Quit, QuitAck, Refused, Resend, Response,
)

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None,
                                reason="needs tshark: apt-get install tshark (make test installs it)")

SETUP = dict(uid=0xDEADBEEF, buffer_size=4 << 20, packet_size=1448, burst_size=12, burst_interval=5,
             death_timer=30, max_buffers=16, data_checksum=True, write_mode=False, transfer_size=123456789)
PACKETS = [
    Open(**SETUP, client_string=b"netblt 1.0"), Response(**SETUP | dict(write_mode=True)), KeepAlive(),
    Quit("the user asked"), QuitAck(), Abort("disk full"), Refused("busy"), Done(),
    Data(buffer=70000, packet=17, high_ack=3, payload=b"\x01\x02\x03\x04\x05"),
    Data(buffer=9, packet=2, high_ack=8, payload=bytes(range(64)), ldata=True, last_buffer=True),
    NullAck(high_ack=65535, burst_size=40, burst_interval=7),
    Control((Go(1, 5), Ok(2, 4, 11, 6, 350), Resend(3, 5, (0, 7, 65535)))),
]
"""One of every NETBLT packet type, and of every control message."""


def tshark(tmp_path: Path, packets: list, *decode_as: str) -> list[dict[str, list[str]]]:
    """Each packet's fields as tshark decodes them with the dissector: name -> values."""
    capture, script = tmp_path / "wire.pcap", tmp_path / "netblt.lua"
    wrpcap(str(capture), packets)
    script.write_text(lua())
    options = [arg for rule in decode_as for arg in ("-d", rule)]
    done = subprocess.run(["tshark", "-r", str(capture), "-X", f"lua_script:{script}", *options, "-T", "json",
                           "--no-duplicate-keys"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Lua" not in done.stderr, done.stderr
    assert "_ws.lua.error" not in done.stdout, "the dissector failed on a packet"
    return [flatten(frame["_source"]["layers"]) for frame in json.loads(done.stdout)]


def flatten(node, out: dict[str, list[str]] | None = None, key: str = "") -> dict[str, list[str]]:
    out = {} if out is None else out
    if isinstance(node, dict):
        for name, value in node.items():
            flatten(value, out, name)
    elif isinstance(node, list):
        for value in node:
            flatten(value, out, key)
    else:
        out.setdefault(key, []).append(node)
    return out


def over_udp(datagram: bytes, port: int = 2998):
    return IP(src="127.0.0.1", dst="127.0.0.2") / UDP(sport=port, dport=port) / Raw(datagram)


def netblt(packet) -> bytes:
    return codec.encode(packet, 2998, 40000, data_checksum=True)


def test_every_netblt_packet_type_over_udp_and_ip_is_decoded_field_by_field(tmp_path):
    wire = [over_udp(netblt(p)) for p in PACKETS]
    wire += [IP(src="127.0.0.1", dst="127.0.0.2", proto=30) / Raw(netblt(p)) for p in PACKETS]
    wire.append(over_udp(netblt(PACKETS[-1]), port=41234))  # another port: found by its header and checksum
    frames = tshark(tmp_path, wire)
    for frame, packet in zip(frames, PACKETS + PACKETS + PACKETS[-1:]):
        assert frame["netblt.version"] == ["2"] and frame["netblt.type"] == [str(int(packet.type))]
        assert frame["netblt.local_port"] == ["2998"] and frame["netblt.foreign_port"] == ["40000"]
        assert frame["netblt.checksum_good"] == ["1"] and "_ws.expert.message" not in frame, frame
        assert_fields(frame, packet)


def assert_fields(frame: dict[str, list[str]], packet) -> None:
    """What the packet's type carries, as the encoder was given it."""
    if isinstance(packet, (Open, Response)):
        for name, value in SETUP.items():
            if name not in ("data_checksum", "write_mode"):
                assert frame[f"netblt.open.{name}"] == [str(value)], name
        assert frame["netblt.open.flags.data_checksum"] == ["1"]
        assert frame["netblt.open.flags.write_mode"] == [str(int(packet.write_mode))]
        assert frame["netblt.client_string"] == [packet.client_string.decode()]
    elif isinstance(packet, (Quit, Abort, Refused)):
        assert frame["netblt.reason"] == [packet.reason]
    elif isinstance(packet, Data):
        assert frame["netblt.data.buffer"] == [str(packet.buffer)] and frame["netblt.data.packet"] == [str(packet.packet)]
        assert frame["netblt.data.high_ack"] == [str(packet.high_ack)]
        assert frame["netblt.data.flags.last_buffer"] == [str(int(packet.last_buffer))]
        assert frame["netblt.data.payload"][0].replace(":", "") == packet.payload.hex()
    elif isinstance(packet, NullAck):
        assert [frame[f"netblt.null_ack.{name}"] for name in ("high_ack", "burst_size", "burst_interval")] == \
            [[str(packet.high_ack)], [str(packet.burst_size)], [str(packet.burst_interval)]]
    elif isinstance(packet, Control):
        messages = packet.messages
        assert frame["netblt.message.type"] == [str(t) for t in (0, 1, 2)]
        assert frame["netblt.message.seq"] == [str(m.seq) for m in messages]
        assert frame["netblt.message.buffer"] == [str(m.buffer) for m in messages]
        ok, resend = messages[1], messages[2]
        assert frame["netblt.ok.burst_size"] == [str(ok.burst_size)]
        assert frame["netblt.ok.burst_interval"] == [str(ok.burst_interval)]
        assert frame["netblt.ok.control_timer"] == [str(ok.control_timer)]
        assert frame["netblt.resend.count"] == ["3"] and frame["netblt.resend.packet"] == [str(n) for n in resend.packets]


def corrupt(data: bytes, at: int, value: int) -> bytes:
    return data[:at] + bytes([value]) + data[at + 1:]


def sealed(data: bytes) -> bytes:
    """The packet with its header checksum made right (over all of it: no DATA here)."""
    return internet_checksum(bytes(2) + data[2:]).to_bytes(2, "big") + data[2:]


def raw(kind: PacketType, body: bytes, length: int | None = None) -> bytes:
    """A packet of ``kind`` with this body, its Length field ``length`` (default: true)."""
    header = HEADER.struct.pack(0, VERSION, kind, HEADER.end + len(body) if length is None else length, 2998, 40000, 0)
    return sealed(header + body)


MALFORMED = {
    "truncated": netblt(KeepAlive())[:8],
    "unsupported version": sealed(corrupt(netblt(KeepAlive()), 2, 3)),
    "unknown packet type": sealed(corrupt(netblt(KeepAlive()), 3, 12)),
    "bad checksum on OPEN": corrupt(netblt(PACKETS[0]), 13, 0x55),
    "too short for QUIT": raw(PacketType.QUIT, b"why\0", length=12),
    "length mismatch": netblt(Quit("why")) + bytes(8),
    "KEEPALIVE must be 12 bytes": raw(PacketType.KEEPALIVE, bytes(4)),
    "not NUL-terminated": raw(PacketType.QUIT, b"abcd"),
    "unknown control message type": raw(PacketType.CONTROL, bytes([7]) + bytes(7)),
    "truncated RESEND": raw(PacketType.CONTROL, bytes([2, 0, 0, 1, 0, 0, 0, 1, 0, 9, 0, 0])),
}
"""Packets the codec refuses, each by what the dissector must say of it."""


def test_every_malformed_kind_is_flagged_never_crashed_on(tmp_path):
    for why, data in MALFORMED.items():
        with pytest.raises(codec.CodecError):
            codec.decode(data)
    frames = tshark(tmp_path, [over_udp(data) for data in MALFORMED.values()])
    for frame, why in zip(frames, MALFORMED):
        assert "netblt.malformed" in frame, why
        assert any(why in message for message in frame["_ws.expert.message"]), (why, frame["_ws.expert.message"])


def test_cut_and_random_datagrams_are_flagged_exactly_when_the_codec_refuses_them(tmp_path):
    """Every packet of every type cut at every fourth byte (its checksum made right again,
    so only the cut is wrong), and random bytes, to the NETBLT port and the host link's."""
    rng = random.Random(3)
    datagrams = [netblt(p)[:cut] for p in PACKETS for cut in range(4, len(netblt(p)), 4)]
    datagrams = [sealed(d) if len(d) >= HEADER.end else d for d in datagrams]
    datagrams += [rng.randbytes(rng.randrange(1, 60)) for _ in range(100)]
    frames = tshark(tmp_path, [over_udp(d) for d in datagrams] +
                    [over_udp(rng.randbytes(rng.randrange(1, 60)), port=link.LINK_PORT) for _ in range(100)])
    for frame, data in zip(frames, datagrams):
        refused = codec_view(data, netblt_port=True) == ("", "", "")
        assert ("netblt.malformed" in frame) == refused, data.hex()


def test_the_host_link_datagrams_and_the_packets_inside_events(tmp_path):
    send = COMMAND_WORD.pack(op=Command.SEND, slot=3, flag=1)
    operations = [link.Operation(link.Opcode.WRITE, ADDRESS["COMMAND"], send),
                  link.Operation(link.Opcode.READ, ADDRESS["GEOMETRY"])]
    event = EVENT_WORD.pack(valid=1, kind=Event.SENT, slot=3, value=9)
    received = EVENT_WORD.pack(valid=1, kind=Event.RECEIVED, slot=1, value=12,
                               flags=RECEIVED_FLAGS.pack(first=1, complete=1))
    inside = netblt(PACKETS[-1])
    datagrams = [
        link.encode(link.Header(link.Type.REGISTERS, id=5, session=77, ack=2), link.encode_operations(operations)),
        link.encode(link.Header(link.Type.UPLOAD, id=6, value=0x400, flags=link.FLAG_QUIET), b"\xaa" * 16),
        link.encode(link.Header(link.Type.DOWNLOAD, id=7, value=0x800), (12).to_bytes(4, "big")),
        link.encode(link.Header(link.Type.EVENTS, id=9),
                    link.encode_events([event, received], [link.ControlPacket(0x7F000002, 2998, inside)])),
        link.encode(link.Header(link.Type.STATUS | link.REPLY), REGISTER_MAP.to_bytes(4, "big") + (5).to_bytes(4, "big")),
        link.encode(link.Header(link.Type.OPEN | link.REPLY, status=link.Status.NOT_OWNER),
                    bytes([127, 0, 0, 3]) + (5555).to_bytes(4, "big") + (250).to_bytes(4, "big")),
        link.encode(link.Header(link.Type.ACK, ack=9)),
        bytes(10),
        link.encode(link.Header(link.Type.ACK, version=9)),
    ]
    frames = tshark(tmp_path, [over_udp(d, port=link.LINK_PORT) for d in datagrams])
    registers, upload, download, events, status, opened, ack, short, stranger = frames
    assert registers["netblt_link.kind"] == ["REGISTERS"] and registers["netblt_link.session"] == ["77"]
    assert registers["netblt_link.id"] == ["5"] and registers["netblt_link.ack"] == ["2"]
    assert registers["netblt_link.operation.register"] == [str(ADDRESS["COMMAND"]), str(ADDRESS["GEOMETRY"])]
    assert registers["netblt_link.operation.name"] == [f"WRITE COMMAND {send}", "READ GEOMETRY 0"]
    assert registers["netblt_link.command.op"] == [str(int(Command.SEND))] and registers["netblt_link.command.slot"] == ["3"]
    assert registers["netblt_link.command.flag"] == ["1"]
    assert upload["netblt_link.data"][0].replace(":", "") == "aa" * 16 and upload["netblt_link.value"] == [str(0x400)]
    assert upload["netblt_link.flags.quiet"] == ["1"]
    assert download["netblt_link.words"] == ["12"]
    assert events["netblt_link.event.kind"] == [str(int(Event.SENT)), str(int(Event.RECEIVED))]
    assert events["netblt_link.event.slot"] == ["3", "1"] and events["netblt_link.event.value"] == ["9", "12"]
    assert events["netblt_link.event.valid"] == ["1", "1"]
    assert [events[f"netblt_link.event.received.{name}"] for name in ("first", "ldata", "complete", "last_buffer")] \
        == [["1"], ["0"], ["1"], ["0"]]
    assert events["netblt_link.control_record.address"] == ["127.0.0.2"]
    assert events["netblt_link.control_record.port"] == ["2998"]
    assert events["netblt.message.buffer"] == ["5", "4", "5"]  # the CONTROL inside, decoded as NETBLT
    assert status["netblt_link.reply"] == ["1"] and status["netblt_link.status_register"] == \
        [f"REGISTER_MAP {REGISTER_MAP}", "PACKET_SIZE 5"]
    assert opened["netblt_link.status"] == [str(int(link.Status.NOT_OWNER))]
    assert opened["netblt_link.owner.address"] == ["127.0.0.3"] and opened["netblt_link.owner.port"] == ["5555"]
    assert opened["netblt_link.owner.silent_ms"] == ["250"]
    assert ack["netblt_link.kind"] == ["ACK"] and "_ws.expert.message" not in ack
    for frame in (short, stranger):
        assert "netblt_link.malformed" in frame


def test_install_puts_it_where_tshark_loads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["wireshark", "--install"]) == 0
    shown = subprocess.run(["tshark", "-G", "protocols"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "HOME": str(tmp_path)}).stdout
    assert "\tnetblt\n" in shown and "\tnetblt_link\n" in shown


def codec_view(datagram: bytes, netblt_port: bool) -> tuple[str, str, str]:
    """(type, buffer, packet) as the host codec reads a NETBLT datagram, or the host link's
    type name; empty fields where it has none, or where the codec refuses it."""
    if netblt_port:
        try:
            packet = codec.decode(datagram).packet
        except codec.CodecError:
            return "", "", ""
        data = isinstance(packet, Data)
        return str(int(packet.type)), str(packet.buffer) if data else "", str(packet.packet) if data else ""
    try:
        header, _ = link.decode(datagram)
        return link.Type(header.type & ~link.REPLY).name, "", ""
    except (link.FormatError, ValueError):
        return "", "", ""


def assert_wireshark_agrees(pcap: Path, tmp_path: Path, netblt_port: int, link_ports: set[int]) -> set[str]:
    """tshark with the dissector reads every NETBLT and host-link datagram of ``pcap`` as the
    host's own code does: malformed exactly where the codec refuses it, else the same type
    (and buffer and packet, for DATA). Returns the NETBLT types seen."""
    script = tmp_path / "netblt.lua"
    script.write_text(lua())
    fields = ("frame.number", "netblt.type", "netblt.data.buffer", "netblt.data.packet", "netblt_link.kind",
              "netblt.malformed", "netblt_link.malformed", "_ws.lua.error")
    done = subprocess.run(["tshark", "-r", str(pcap), "-X", f"lua_script:{script}", "-d",
                           f"udp.port=={netblt_port},netblt",
                           *[arg for port in link_ports for arg in ("-d", f"udp.port=={port},netblt_link")],
                           "-T", "fields", "-E", "occurrence=f", "-E", "separator=/t",
                           *[arg for field in fields for arg in ("-e", field)]],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Lua" not in done.stderr, done.stderr
    rows = {int(row[0]): row[1:] for row in (line.split("\t") for line in done.stdout.splitlines())}
    assert not [number for number, row in rows.items() if row[6]], "the dissector failed on packets"
    seen, checked = set(), 0
    for number, (sport, dport, payload) in udp_datagrams(pcap):
        if not {sport, dport} & ({netblt_port} | link_ports):
            continue
        is_netblt = netblt_port in (sport, dport)
        expected, row = codec_view(payload, is_netblt), rows[number]
        flagged = bool(row[4] if is_netblt else row[5])
        assert flagged == (expected[0] == ""), (number, row, expected)
        if not flagged:
            assert (tuple(row[:3]) if is_netblt else (row[3], "", "")) == expected, (number, row)
            seen.add(expected[0] if is_netblt else "")
        checked += 1
    assert checked
    return seen - {""}


def udp_datagrams(pcap: Path) -> Iterator[tuple[int, tuple[int, int, bytes]]]:
    """(frame number, (source port, destination port, payload)) of each IPv4 UDP datagram:
    Ethernet frames (the design under Verilator's wire) or IP packets (the model's)."""
    reader = RawPcapReader(str(pcap))
    ethernet = ETHERNET_HEADER if reader.linktype == LINKTYPE_ETHERNET else 0
    for number, (frame, _) in enumerate(reader, 1):
        if ethernet and frame[12:14] != b"\x08\x00":
            continue
        if (parts := udp(frame[ethernet:])) is not None:
            yield number, parts
