"""BoardDataPath's own logic, without a board: what it makes of register values."""

from __future__ import annotations

from netblt.driver import link_format as F
from netblt.driver.board import BoardClock, BoardDataPath, Slot
from netblt.driver.link import Request
from netblt.gateware.registers import ADDRESS
from netblt.host import events as ev


def flushed(stale: int, readings: list[int]) -> list[int]:
    """The high-acks that reach the engine when RX_HIGH_ACK reads ``readings`` in turn,
    the last connection having left it at ``stale``."""
    dp = object.__new__(BoardDataPath)  # no link: the register reads are given below
    dp.rx, dp.tx, dp.events, dp.tx_busy = {0: Slot(1)}, {}, [], False
    dp.clock, dp.stale_high_ack = BoardClock(50_000_000), stale
    values = iter([[1000 * i, 0, high_ack, 5, 1000 * i, 100] for i, high_ack in enumerate(readings)])
    dp._operations = lambda operations, wait=False, urgent=False: next(values)
    return [e.high_ack for _ in readings for e in dp.flush() if isinstance(e, ev.Arrivals)]


def test_the_last_connections_high_ack_acknowledges_nothing():
    """The board keeps RX_HIGH_ACK across connections: until this connection's DATA moves
    it, it says nothing, or the receiver would retire control messages never acknowledged."""
    assert flushed(7, [7, 7, 9, 7]) == [0, 0, 9, 7]
    assert flushed(0, [0, 3]) == [0, 3]


def test_flush_reads_only_slots_whose_post_ran_and_goes_ahead_of_queued_data():
    """A flush is the host's wait for the board's status before a timer fires. Its reads
    go before uploads and downloads queued (behind a 4 MiB upload, a RESEND reaching the
    host waited the whole upload: 50 ms of a simulated 100 ms path), and read no slot
    whose POST the board has not run yet: its status is a previous buffer's."""
    dp = object.__new__(BoardDataPath)
    dp.tx, dp.events, dp.tx_busy = {}, [], False
    dp.clock, dp.stale_high_ack = BoardClock(50_000_000), None
    waiting = Request(F.Type.REGISTERS)  # its reply has not come
    done = Request(F.Type.REGISTERS, reply=(None, b""))
    dp.rx = {0: Slot(1, posted=[waiting]), 1: Slot(2, posted=[done])}
    asked = []

    def operations(ops, wait=False, urgent=False):
        asked.append((ops, urgent))
        return [1000, 0, 0, 5, 900, 100]

    dp._operations = operations
    dp.flush()
    (ops, urgent), = asked
    assert urgent
    assert [op.value for op in ops if op.register == ADDRESS["STATUS_SLOT"]] == [1]
