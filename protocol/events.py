"""What goes into the sans-IO protocol core (events) and what comes out (actions).

The data-path events and the data-path actions are the whole boundary between the
core and a data path (software, board or simulation): everything is per buffer or
per control message, never per packet.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from .packets import Packet
from .params import Params

Address = Hashable
"""Where a packet came from or goes to, as the data path names it (``(host, port)`` on
sockets); the core only ever compares addresses."""

# -- events: into the core ----------------------------------------------------------------


@dataclass(frozen=True)
class PacketReceived:
    """A non-data NETBLT packet arrived (CONTROL, NULL-ACK, OPEN, ...)."""

    packet: Packet
    source: Address = None
    """Its sender; only the peer's packets act on an open connection."""


@dataclass(frozen=True)
class FirstPacket:
    """The first packet of receive buffer ``buffer`` arrived."""

    buffer: int
    last_buffer: bool
    """Its L flag: this is the transfer's last buffer."""


@dataclass(frozen=True)
class LdataSeen:
    """The LDATA of ``buffer`` arrived: the buffer has ``count`` packets."""

    buffer: int
    count: int


@dataclass(frozen=True)
class FirstPass:
    """How long a buffer's first pass took to arrive (its packets each numbered above
    every one before it; resends come later, and lower), and how many DATA packets of
    any buffer arrived meanwhile: what the path delivered."""

    spread: float
    """Seconds from its first packet to its last."""
    arrivals: int
    """DATA packets that arrived in that time, both ends counted, resends included."""
    lost: int
    """Of the buffer's own packets, those not there when the missing ones were first
    asked for (packets that came out of order before that are not lost)."""


@dataclass(frozen=True)
class BufferComplete:
    buffer: int
    size: int
    """Bytes of data in the buffer."""
    first_pass: FirstPass | None = None
    """None where the data path cannot time it (a board's buffer that needed resends)."""


@dataclass(frozen=True)
class MissingPackets:
    """The answer to :class:`QueryMissing`."""

    buffer: int
    packets: tuple[int, ...]


@dataclass(frozen=True)
class Arrivals:
    """Data-packet activity since the last report (sent a few times a second at most)."""

    last_at: float
    """When the newest data packet arrived."""
    mean_gap: float
    """Smoothed inter-packet arrival time in seconds, 0 if not known yet."""
    high_ack: int
    """The newest high-ack carried by DATA/LDATA (16-bit, as on the wire)."""


@dataclass(frozen=True)
class TransmitIdle:
    """The data path has sent everything it was asked to send."""


@dataclass(frozen=True)
class BufferReleased:
    """The client has finished with delivered receive buffer ``buffer``."""

    buffer: int


@dataclass(frozen=True)
class LastBuffer:
    """The data sender's client found where its data ends (a stream of unknown size)."""

    buffer: int


@dataclass(frozen=True)
class PeerUnreachable:
    """The network said nobody is listening at the peer's address."""

    detail: str


Event = (PacketReceived | FirstPacket | LdataSeen | BufferComplete | MissingPackets | Arrivals
         | TransmitIdle | BufferReleased | LastBuffer | PeerUnreachable)

# -- actions: out of the core -------------------------------------------------------------


@dataclass(frozen=True)
class Transmit:
    """Send this non-data packet to ``to`` (the peer, or a stranger being refused)."""

    packet: Packet
    to: Address = None


@dataclass(frozen=True)
class SendBuffer:
    """Load the client's ``index``-th buffer (0-based) and send it as buffer ``buffer``.

    ``last`` is set when the transfer size says so; a client reading a stream of unknown
    size finds its last buffer itself and answers with :class:`LastBuffer`.
    """

    buffer: int
    index: int
    last: bool


@dataclass(frozen=True)
class ResendPackets:
    buffer: int
    packets: tuple[int, ...]


@dataclass(frozen=True)
class ReleaseSendBuffer:
    """Buffer ``buffer`` (the client's ``index``-th) was acknowledged (OK): reuse its memory.

    ``sent`` is False for a buffer the receiver already held (a resumed transfer).
    """

    buffer: int
    index: int
    sent: bool = True


@dataclass(frozen=True)
class SetRate:
    burst_size: int
    burst_interval: int
    """Milliseconds."""


@dataclass(frozen=True)
class StampHighAck:
    """Carry this high-ack (16-bit) in every DATA/LDATA sent from now on."""

    high_ack: int


@dataclass(frozen=True)
class PostReceive:
    """Set up receive buffer ``buffer`` for at most ``capacity`` packets."""

    buffer: int
    capacity: int


@dataclass(frozen=True)
class DropReceive:
    """Forget receive buffer ``buffer`` (posted beyond the transfer's last buffer)."""

    buffer: int


@dataclass(frozen=True)
class QueryMissing:
    buffer: int


@dataclass(frozen=True)
class Deliver:
    """Receive buffer ``buffer`` is complete: hand its ``size`` bytes to the client, in order."""

    buffer: int
    index: int
    size: int
    final: bool = False
    """Every other buffer is in: the client can judge the whole transfer now, while the
    connection is still open to tell the sender."""


@dataclass(frozen=True)
class Admit:
    """An acceptable OPEN arrived: the client answers at once with
    :meth:`~netblt.protocol.connection.Connection.admit` or
    :meth:`~netblt.protocol.connection.Connection.refuse` (its file name, its sender, its proof)."""

    client_string: bytes
    params: Params
    """The parameters the RESPONSE would give."""
    source: Address
    uid: int
    transfer_size: int | None = None
    """The OPEN's transfer size; None when unknown."""


@dataclass(frozen=True)
class Established:
    """The connection is open with these final parameters."""

    params: Params
    peer_client_string: bytes
    peer: Address = None
    transfer_size: int | None = None
    """Bytes the data sender's client supplies; None when unknown (a stream, or 4 GiB or more)."""


@dataclass(frozen=True)
class Finished:
    """The connection is over; nothing more will be sent."""

    ok: bool
    reason: str


Action = (Transmit | SendBuffer | ResendPackets | ReleaseSendBuffer | SetRate | StampHighAck
          | PostReceive | DropReceive | QueryMissing | Deliver | Admit | Established | Finished)
