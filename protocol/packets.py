"""NETBLT packets and control messages as plain values (what the codec reads and writes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..formats.rfc998 import PacketType


@dataclass(frozen=True)
class Setup:
    """The connection request and its answer share one layout (RFC 998 section 8)."""

    uid: int
    buffer_size: int
    packet_size: int
    burst_size: int
    burst_interval: int
    """Milliseconds from the start of one burst to the start of the next (reading A4)."""
    death_timer: int
    """Seconds: the death timer of the end that sends this packet."""
    max_buffers: int
    data_checksum: bool
    write_mode: bool
    """True when the active end is the data sender (reading A17)."""
    transfer_size: int = 0
    """Informational only; 0 means unknown (reading A18)."""
    client_string: bytes = b""


@dataclass(frozen=True)
class Open(Setup):
    type: ClassVar[PacketType] = PacketType.OPEN


@dataclass(frozen=True)
class Response(Setup):
    type: ClassVar[PacketType] = PacketType.RESPONSE


@dataclass(frozen=True)
class _Reason:
    reason: str = ""


@dataclass(frozen=True)
class Quit(_Reason):
    type: ClassVar[PacketType] = PacketType.QUIT


@dataclass(frozen=True)
class Abort(_Reason):
    type: ClassVar[PacketType] = PacketType.ABORT


@dataclass(frozen=True)
class Refused(_Reason):
    type: ClassVar[PacketType] = PacketType.REFUSED


@dataclass(frozen=True)
class KeepAlive:
    type: ClassVar[PacketType] = PacketType.KEEPALIVE


@dataclass(frozen=True)
class QuitAck:
    type: ClassVar[PacketType] = PacketType.QUITACK


@dataclass(frozen=True)
class Done:
    type: ClassVar[PacketType] = PacketType.DONE


@dataclass(frozen=True)
class Data:
    """DATA, or LDATA (the last packet of its buffer) when ``ldata`` is set."""

    buffer: int
    packet: int
    high_ack: int
    payload: bytes
    ldata: bool = False
    last_buffer: bool = False
    """The L flag: this packet belongs to the last buffer of the transfer."""

    @property
    def type(self) -> PacketType:
        return PacketType.LDATA if self.ldata else PacketType.DATA


@dataclass(frozen=True)
class NullAck:
    high_ack: int
    burst_size: int
    burst_interval: int
    type: ClassVar[PacketType] = PacketType.NULL_ACK


@dataclass(frozen=True)
class Go:
    seq: int
    buffer: int


@dataclass(frozen=True)
class Ok:
    seq: int
    buffer: int
    burst_size: int
    burst_interval: int
    control_timer: int
    """Milliseconds: the receiver's control timer, on which the sender bases its dally."""


@dataclass(frozen=True)
class Resend:
    seq: int
    buffer: int
    packets: tuple[int, ...]


Message = Go | Ok | Resend


@dataclass(frozen=True)
class Control:
    messages: tuple[Message, ...] = field(default_factory=tuple)
    type: ClassVar[PacketType] = PacketType.CONTROL


Packet = Open | Response | KeepAlive | Quit | QuitAck | Abort | Data | NullAck | Control | Refused | Done


@dataclass(frozen=True)
class Frame:
    """A decoded packet with its common-header ports, as its sender wrote them."""

    packet: Packet
    local_port: int
    foreign_port: int
