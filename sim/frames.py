"""Ethernet frames of IPv4 datagrams, packed and read with struct, and the pcap files
both simulated boards write of them.

sim-board's bridge handles every frame the simulated board sends or receives, between the
board's cycles; scapy took 150 us to read one and 675 us to build one, and Python was a
quarter of sim-board's time during a transfer. ARP, rare, and the cocotb testbenches
keep scapy. The frames built here are byte for byte those scapy builds with its defaults
(tests/test_sim_board.py holds them together). The board's model records its datagrams
as IPv4 packets, with no Ethernet around them.
"""

from __future__ import annotations

import functools
import socket
import struct
from pathlib import Path
from typing import NamedTuple

from ..formats.checksum import internet_checksum

ETHERNET = struct.Struct("!6s6sH")
IPV4 = struct.Struct("!BBHHHBBH4s4s")
UDP = struct.Struct("!HHHH")
ETHERTYPE_IPV4, ETHERTYPE_ARP = 0x0800, 0x0806
UDP_PROTOCOL = 17
TTL, IDENTIFICATION = 64, 1  # scapy's defaults, kept so that the pcap reads as before
PCAP_HEADER = struct.Struct("<IHHiIII")
PCAP_RECORD = struct.Struct("<IIII")
PCAP_NANOSECONDS = 0xA1B23C4D
"""The magic number of a pcap file whose records are stamped to the nanosecond."""
LINKTYPE_ETHERNET, LINKTYPE_RAW = 1, 101


class Datagram(NamedTuple):
    """An IPv4 datagram out of a frame; the ports are 0 unless it is UDP."""

    source: str
    destination: str
    protocol: int
    source_port: int
    destination_port: int
    payload: bytes
    """UDP's data by its length field; any other protocol's by the IP total length."""


@functools.cache
def mac(text: str) -> bytes:
    """A MAC address's bytes, read once: the bridge's two are in every frame."""
    return bytes.fromhex(text.replace(":", ""))


def ethernet(destination: str, source: str, ethertype: int, payload: bytes) -> bytes:
    return ETHERNET.pack(mac(destination), mac(source), ethertype) + payload


def ipv4(source: str, destination: str, protocol: int, payload: bytes) -> bytes:
    """An IPv4 header (no options, its checksum set) before ``payload``."""
    header = IPV4.pack(0x45, 0, IPV4.size + len(payload), IDENTIFICATION, 0, TTL, protocol, 0,
                       socket.inet_aton(source), socket.inet_aton(destination))
    checksum = internet_checksum(header)
    return header[:10] + checksum.to_bytes(2, "big") + header[12:] + payload


def udp(source: str, destination: str, source_port: int, destination_port: int, data: bytes,
        checksum: bool = True) -> bytes:
    """An IPv4 datagram of UDP, its checksum over the pseudo-header set (0 sent as 0xFFFF);
    without ``checksum``, 0 (none, as IPv4 allows)."""
    length = UDP.size + len(data)
    header = UDP.pack(source_port, destination_port, length, 0)
    if checksum:
        pseudo = socket.inet_aton(source) + socket.inet_aton(destination) + struct.pack("!BBH", 0, UDP_PROTOCOL, length)
        header = UDP.pack(source_port, destination_port, length, internet_checksum(pseudo + header + data) or 0xFFFF)
    return ipv4(source, destination, UDP_PROTOCOL, header + data)


def ethertype(frame: bytes) -> int | None:
    return ETHERNET.unpack_from(frame)[2] if len(frame) >= ETHERNET.size else None


def datagram(frame: bytes) -> Datagram | None:
    """The IPv4 datagram in ``frame``, or None where the frame holds none or a malformed one
    (too short for its headers or for the lengths they give)."""
    if ethertype(frame) != ETHERTYPE_IPV4:
        return None
    start = ETHERNET.size
    if len(frame) < start + IPV4.size:
        return None
    version_ihl, _, total, _, _, _, protocol, _, source, destination = IPV4.unpack_from(frame, start)
    header = 4 * (version_ihl & 0x0F)
    if version_ihl >> 4 != 4 or header < IPV4.size or not header <= total <= len(frame) - start:
        return None
    body = frame[start + header:start + total]
    ports = (0, 0)
    if protocol == UDP_PROTOCOL:
        if len(body) < UDP.size:
            return None
        *ports, length, _ = UDP.unpack_from(body)
        if not UDP.size <= length <= len(body):
            return None
        body = body[UDP.size:length]
    return Datagram(socket.inet_ntoa(source), socket.inet_ntoa(destination), protocol, *ports, body)


class Pcap:
    """A pcap file of ``linktype`` packets stamped to the nanosecond, each record written
    as its packet comes (tcpdump, Wireshark and scapy read it)."""

    def __init__(self, path: Path, linktype: int, *, sync: bool = False) -> None:
        """With ``sync``, each record reaches the file at once, for a reader while it runs."""
        self.file = path.open("wb", buffering=0 if sync else -1)
        self.file.write(PCAP_HEADER.pack(PCAP_NANOSECONDS, 2, 4, 0, 0, 65535, linktype))

    def write(self, packet: bytes, at: float) -> None:
        """``packet`` stamped ``at`` seconds (since the epoch, or of simulated time)."""
        seconds = int(at)
        nanoseconds = min(round((at - seconds) * 1e9), 999_999_999)
        self.file.write(PCAP_RECORD.pack(seconds, nanoseconds, len(packet), len(packet)) + packet)

    def close(self) -> None:
        self.file.close()
