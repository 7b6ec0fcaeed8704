"""What a data path offers a transfer in real time (host/transfer.py), beyond the protocol
core's buffer-level calls (protocol/endpoint.py ``DataPath``): the run loop's waits, what
it holds and makes, its reports, its life. This host's sockets (driver/software.py) and a
board (driver/board.py) both offer it; a transfer never looks inside either.
"""

from __future__ import annotations

from typing import Protocol

from ..formats.born import BornBuffer
from ..protocol import events as ev
from ..protocol.endpoint import DataPath
from ..protocol.params import Params


class RealTimeDataPath(DataPath, Protocol):
    name: str
    """What carries the packets: "software" (this host) or "board"."""
    cpu_at_configure: float
    """CPU seconds of its own threads when the connection was configured."""

    @property
    def peer(self) -> ev.Address:
        """Where an active end opens to; once established, the peer (None: not known yet)."""

    @property
    def local_port(self) -> int:
        """Its NETBLT port: the one a peer's packets reach."""

    @property
    def address(self) -> str:
        """The address peers reach it at: a board's own, or this host's socket's."""

    # -- what it holds and makes ---------------------------------------------------------------------

    def fit(self, params: Params, *, sending: bool, defaults: frozenset[str] = frozenset()) -> Params:
        """``params`` restricted to what it can carry (a board's slots and wire); the values
        named in ``defaults`` (the user left them) as suits it."""

    def makes(self, born: type[BornBuffer]) -> bool:
        """It can make buffers of this kind itself (formats/born.py)."""

    def drain_lacks(self, checked: bool) -> str | None:
        """What it lacks to drain received buffers where they arrive (a board's sink port;
        ``checked``: its pattern checker watching), if anything."""

    def start_stamps(self, bits_per_second: float) -> None:
        """Start its stamp source at this rate (a board's; see ``makes``)."""

    # -- the run loop ---------------------------------------------------------------------------

    def wait_events(self, timeout: float) -> list[ev.Event]:
        """Events for the protocol core, waiting up to ``timeout`` seconds for the first."""

    def flush(self) -> list[ev.Event]:
        """Just before a timer fires: what arrived lately, so no timer fires on stale news."""

    def interrupt(self) -> None:
        """A signal came: what it still has to say gets a moment, then every wait ends."""

    # -- reports -----------------------------------------------------------------------------------

    def drop_counts(self) -> dict[str, int]:
        """Bad packets counted and dropped, by reason."""

    def counters(self) -> dict[str, int]:
        """Its hardware's counters (a board's registers), read now; none in software."""

    def thread_cpu(self) -> float:
        """CPU seconds its own threads have used (none on a board)."""

    @property
    def duplicates(self) -> int:
        """Harmless second copies of DATA packets."""

    @property
    def resent(self) -> int:
        """DATA packets sent again at the peer's request."""

    @property
    def host_link_bytes(self) -> int:
        """Bytes between this host and its board, both ways (0 in software)."""

    @property
    def host_link_requests(self) -> int:
        """Requests this host sent its board (0 in software)."""

    @property
    def link_mtu(self) -> int | None:
        """The largest IP datagram between this host and its board, as the session found or
        was told (None in software)."""

    @property
    def host_link_slow_path(self) -> int:
        """Datagrams from its board this host took one at a time (0 in software)."""

    # -- its life ------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget the finished connection; keep the socket or board for the next."""

    def close(self) -> None:
        """Let what is queued leave, then end."""
