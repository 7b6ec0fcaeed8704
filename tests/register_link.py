"""A host link that is only a register file: the board data path's parts (the session, the
transmit and receive sides) tested through their own calls, with no datagrams and no
board model behind them."""

from __future__ import annotations

import time
from collections.abc import Callable

from netblt.driver.board_session import BoardSession
from netblt.driver.link_client import LinkClient
from netblt.driver.link_requests import Request
from netblt.formats import host_link as F
from netblt.formats.boards import SIMULATION
from netblt.formats.registers import ADDRESS, GEOMETRY_WORD

NAMES = {address: name for name, address in ADDRESS.items()}
SLOTS = 16
"""Transmit and receive slots, of the simulated design's 16 KiB each (the Versa's count)."""


class RegisterLink:
    """A board of 16 slots each way; runs each REGISTERS request as it is submitted: ``answer(name, value)`` gives a read's
    value (None: the register file's); writes are kept in :attr:`registers`; CYCLES counts
    the simulation geometry's clock in real time, as a board on a cable does. Every request
    is kept in :attr:`requests` as (operations, urgent); uploads and downloads move
    :attr:`memory`."""

    shown = "a register file"
    mtu = 1500

    def __init__(self, answer: Callable[[str, int], int | None] = lambda name, value: None,
                 **registers: int) -> None:
        self.answer = answer
        self.client = LinkClient()
        g = SIMULATION
        self.registers = {"GEOMETRY": GEOMETRY_WORD.pack(tx_slots=SLOTS, rx_slots=SLOTS, data_width=32,
                                                         log2_max_packets=10, fill=1),
                          "SLOT_BYTES": g.slot_bytes, "CLOCK_HZ": g.clock_hz, "IP_ADDRESS": 0x7F000001} | registers
        self.requests: list[tuple[list[F.Operation], bool]] = []
        self.memory = bytearray(SLOTS * g.slot_bytes)
        self.deadline: float | None = None
        self.sent_at = time.monotonic()
        self.started = time.monotonic()

    def submit(self, requests: F.Requests, join: bool = False, urgent: bool = False) -> list[Request]:
        done = []
        for kind, body, value in requests:
            operations = F.decode_operations(body)
            self.requests.append((operations, urgent))
            done.append(Request(kind, body, value, reply=(F.Header(kind | F.REPLY), self._run(operations))))
        return done

    def wait(self, requests: list[Request]) -> list[tuple[F.Header, bytes]]:
        return [request.reply for request in requests]

    def upload(self, word_address: int, data: bytes | memoryview) -> None:
        self.memory[4 * word_address:4 * word_address + len(data)] = data

    def download(self, word_address: int, size: int, first: Request | None = None) -> bytes:
        if first is not None:
            first.reply = (F.Header(F.Type.REGISTERS | F.REPLY), self._run(F.decode_operations(first.body)))
            self.requests.append((F.decode_operations(first.body), False))
        return bytes(self.memory[4 * word_address:4 * word_address + size])

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def reads(self, name: str) -> int:
        """Reads of register ``name`` so far."""
        return sum(op.register == ADDRESS[name] and op.opcode == F.Opcode.READ
                   for operations, _ in self.requests for op in operations)

    def _run(self, operations: list[F.Operation]) -> bytes:
        out = []
        for op in operations:
            name = NAMES[op.register]
            if op.opcode == F.Opcode.WRITE:
                self.registers[name] = op.value
                out.append(F.Operation(op.opcode | F.DONE, op.register, op.value))
                continue
            value = self.answer(name, op.value)
            if value is None:
                value = (round((time.monotonic() - self.started) * SIMULATION.clock_hz) & 0xFFFF_FFFF
                         if name == "CYCLES" else self.registers.get(name, 0))
            out.append(F.Operation(op.opcode | F.DONE, op.register, value))
        return F.encode_operations(out)


def session(link: RegisterLink | None = None, notice: Callable[[str], None] = lambda text: None) -> BoardSession:
    """A session with the register file (its clock measured as a board on a cable's)."""
    return BoardSession(link or RegisterLink(), notice)  # type: ignore[arg-type]
