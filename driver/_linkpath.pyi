"""Types of driver/_linkpath.c: the host link's bulk path (driver/link.py ``BoardLink._bulk``)."""

from typing import TypedDict

class BulkRun(TypedDict):
    """What a run did: the requests it counted and sent, those sent and not answered (their
    index, ID and when they went), the datagrams it handed back and the pushes it held,
    the push it held last and the one its last request acknowledged, its bytes each way,
    why it stopped (None: every request answered), the first and last requests' replies,
    whether the socket still takes segmentation offload, its slowest round trip, and the
    furthest ``ack`` the board sent (None: it sent none)."""

    count: int
    next: int
    waiting: list[tuple[int, int, float, bool]]
    others: list[bytes]
    pushes: list[bytes]
    held: int
    acked: int
    bytes_out: int
    bytes_in: int
    stopped: str | None
    first: bytes | None
    offload: bool
    slowest: float
    last: bytes | None
    ack: int | None

def layout(fields: tuple[tuple[int, int], ...], header_size: int, version: int, reply_bit: int, type_events: int,
           type_registers: int, type_upload: int, type_download: int, status_ok: int, flag_quiet: int, /) -> None: ...
def bulk(fd: int, kind: int, session: int, held: int, first_id: int, window: int, word_address: int,
         data: bytes | bytearray | memoryview, step: int, timeout: float, first: bytes | None = None,
         offload: bool = True, parts: int = 1, last: bytes | None = None, leave: int = 0,
         patience: float = 0.0) -> BulkRun: ...
