"""A connection's non-data packets on any data path: encoded for their destination,
decoded with the port checks, and the peer's NETBLT port learned from set-up.

The software data path, the simulated one and the board's all carry control packets
the same way; only where the bytes go differs.
"""

from __future__ import annotations

from collections import Counter, OrderedDict

from ..protocol import events as ev
from ..protocol.codec import CodecError, decode, encode
from ..protocol.packets import Open, Packet, Response

OPENERS_KEPT = 64
"""NETBLT ports remembered from OPENs not yet answered, so each answer reaches its opener."""


class ControlCodec:
    """``peer`` is the address an active end opens to (``foreign_port`` its NETBLT port until
    the RESPONSE says otherwise); a passive end learns both at :meth:`configure`."""

    def __init__(self, local_port: int, foreign_port: int = 0, peer: ev.Address = None) -> None:
        self.local_port, self.foreign_port, self.peer = local_port, foreign_port, peer
        self.established = False
        self._openers: OrderedDict[ev.Address, int] = OrderedDict()
        """Source address -> NETBLT port of the latest OPEN from it not yet answered."""

    def fresh(self) -> ControlCodec:
        """A codec for this port's next connection, knowing the ports of the OPENs that came
        during this one (a restarted peer's, which may replace it)."""
        codec = ControlCodec(self.local_port)
        codec._openers = self._openers
        return codec

    def configure(self, peer: ev.Address) -> None:
        self.peer, self.established = peer, True
        if peer in self._openers:
            self.foreign_port = self._openers[peer]
        self._openers.clear()

    def encode(self, packet: Packet, to: ev.Address) -> bytes:
        """A non-data packet for ``to``, ready to send at once (control traffic is not paced)."""
        port = self.foreign_port if to == self.peer else self._openers.get(to, 0)
        return encode(packet, self.local_port, port)

    def decode(self, datagram: bytes | memoryview, source: ev.Address, dropped: Counter[str]) -> Packet | None:
        """The packet in ``datagram``, or None when it is counted in ``dropped``."""
        try:
            frame = decode(datagram)
        except CodecError as exc:
            dropped[str(exc).split(":")[0]] += 1
            return None
        if self.established and source == self.peer and (frame.foreign_port != self.local_port
                                                          or frame.local_port != self.foreign_port):
            dropped["ports"] += 1
            return None
        # Each end learns the other's NETBLT port from the set-up exchange: through a relay
        # or NAT the UDP port the user named is not the peer's own.
        if isinstance(frame.packet, Open):
            self._openers[source] = frame.local_port
            self._openers.move_to_end(source)
            while len(self._openers) > OPENERS_KEPT:
                self._openers.popitem(last=False)
        elif isinstance(frame.packet, Response) and source == self.peer and not self.established:
            self.foreign_port = frame.local_port
        return frame.packet
