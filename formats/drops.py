"""Why the receive side drops a packet: one counter per reason, in this order."""

from __future__ import annotations

import enum


class Drop(enum.IntEnum):
    SHORT = 0
    LENGTH = 1
    VERSION = 2
    CHECKSUM = 3
    DATA_CHECKSUM = 4
    TYPE = 5
    CONNECTION = 6
    UNPOSTED = 7
    OUTSIDE = 8
    PAST_LDATA = 9
    CONTROL_OVERFLOW = 10
    FRAME = 11

    @property
    def doc(self) -> str:
        return _DOCS[self]


_DOCS = {
    Drop.SHORT: "ended before its header did",
    Drop.LENGTH: "length field disagrees with the bytes received, DATA without data, DATA not "
                 "PACKET_SIZE long (LDATA: longer), or longer than the receive store takes whole",
    Drop.VERSION: "version is not 2",
    Drop.CHECKSUM: "header checksum (DATA/LDATA) or whole-packet checksum (others) fails",
    Drop.DATA_CHECKSUM: "data-area checksum fails, when negotiated",
    Drop.TYPE: "not a NETBLT packet type",
    Drop.CONNECTION: "wrong protocol or UDP port, or DATA from another peer address or port",
    Drop.UNPOSTED: "DATA for a buffer with no posted receive slot",
    Drop.OUTSIDE: "packet number or length reaches past the slot, buffer or bitmap",
    Drop.PAST_LDATA: "DATA beyond its buffer's LDATA, or a conflicting LDATA",
    Drop.CONTROL_OVERFLOW: "control packet did not fit in the control FIFO",
    Drop.FRAME: "the link layer flagged its frame (Ethernet frame check failed, or the frame carried "
                "more than its IP datagram: frames spliced in the MAC's receive FIFO)",
}
