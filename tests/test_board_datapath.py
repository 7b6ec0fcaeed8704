"""BoardDataPath's own logic, without a board: what it makes of register values."""

from __future__ import annotations

from netblt.driver.board import BoardClock, BoardDataPath, Slot
from netblt.host import events as ev


def flushed(stale: int, readings: list[int]) -> list[int]:
    """The high-acks that reach the engine when RX_HIGH_ACK reads ``readings`` in turn,
    the last connection having left it at ``stale``."""
    dp = object.__new__(BoardDataPath)  # no link: the register reads are given below
    dp.rx, dp.tx, dp.events, dp.tx_busy = {0: Slot(1)}, {}, [], False
    dp.clock, dp.stale_high_ack = BoardClock(50_000_000), stale
    values = iter([[1000 * i, 0, high_ack, 5, 1000 * i, 100] for i, high_ack in enumerate(readings)])
    dp._operations = lambda operations, wait=False: next(values)
    return [e.high_ack for _ in readings for e in dp.flush() if isinstance(e, ev.Arrivals)]


def test_the_last_connections_high_ack_acknowledges_nothing():
    """The board keeps RX_HIGH_ACK across connections: until this connection's DATA moves
    it, it says nothing, or the receiver would retire control messages never acknowledged."""
    assert flushed(7, [7, 7, 9, 7]) == [0, 0, 9, 7]
    assert flushed(0, [0, 3]) == [0, 3]
