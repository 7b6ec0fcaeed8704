"""sim/rtl/harness.cpp from Python: a Verilated node whose cycles run in C++, reached a
frame at a time (``netblt sim-board``'s board; the cocotb testbenches drive theirs a
signal at a time instead, where per-cycle control is the point)."""

from __future__ import annotations

import ctypes
import zlib
from pathlib import Path

HOST_MAC = "02:00:00:00:00:02"
"""The simulated board's neighbour on its wire: the frames the bridge and the cocotb
testbenches send come from it, and their ARP answers give it."""
MIN_FRAME = 60
"""An Ethernet frame's bytes before its FCS at least: shorter ones are padded."""
FCS = 4
MOST_FRAME = 16384
"""Bytes a frame from the board may have (a jumbo frame's 9,018 and room)."""



def period_ps(hz: float) -> int:
    """A clock's period in picoseconds, even (two equal halves): whole nanoseconds would
    run a 45 MHz engine at 45.45."""
    return 2 * round(1e12 / hz / 2)


_SIGNATURES = {
    "board_new": (ctypes.c_void_p, [ctypes.c_uint64, ctypes.c_uint64]),
    "board_free": (None, [ctypes.c_void_p]),
    "board_run": (None, [ctypes.c_void_p, ctypes.c_uint64]),
    "board_now_ps": (ctypes.c_uint64, [ctypes.c_void_p]),
    "board_cycles": (ctypes.c_uint64, [ctypes.c_void_p]),
    "board_queued": (ctypes.c_int, [ctypes.c_void_p]),
    "board_send": (None, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint64]),
    "board_take": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                  ctypes.POINTER(ctypes.c_uint64)]),
}


class HarnessError(RuntimeError):
    """The simulated board could not start."""


class Harness:
    """The node in ``library`` (hdl.build_harness's), out of reset, its system clock at
    ``clock_hz`` and, with a DRAM core, that core's at ``dram_hz`` (ready when this returns)."""

    def __init__(self, library: Path, clock_hz: float, dram_hz: float | None = None) -> None:
        self.lib = ctypes.CDLL(str(library))
        for name, (result, arguments) in _SIGNATURES.items():
            function = getattr(self.lib, name)
            function.restype, function.argtypes = result, arguments
        self.board = self.lib.board_new(period_ps(clock_hz), period_ps(dram_hz) if dram_hz else 0)
        if not self.board:
            raise HarnessError("the simulated board's DRAM core never said it was ready (5 ms simulated)")
        self.space = ctypes.create_string_buffer(MOST_FRAME)
        self.stamp = ctypes.c_uint64()
        self.bad_frames = 0
        """Frames from the board whose FCS did not hold (dropped)."""

    def run(self, cycles: int) -> None:
        """``cycles`` of the system clock."""
        self.lib.board_run(self.board, cycles)

    @property
    def now(self) -> float:
        """Simulated seconds since the board was made."""
        return self.lib.board_now_ps(self.board) / 1e12

    @property
    def cycles(self) -> int:
        return self.lib.board_cycles(self.board)

    def queued(self) -> int:
        """Frames handed in and not yet wholly on the board's receive wire."""
        return self.lib.board_queued(self.board)

    def send(self, frame: bytes, at: float = 0.0) -> None:
        """``frame`` (no FCS: it is added, the frame padded to the minimum first) onto the
        board's receive wire, after those queued and not before simulated second ``at``."""
        frame = frame.ljust(MIN_FRAME, b"\0")
        frame += zlib.crc32(frame).to_bytes(FCS, "little")
        self.lib.board_send(self.board, frame, len(frame), round(at * 1e12))

    def take(self) -> list[tuple[bytes, float]]:
        """The frames the board sent since the last take, without their FCS, each with the
        simulated second its last byte left; one whose FCS does not hold is counted in
        :attr:`bad_frames` and left out."""
        frames = []
        while (length := self.lib.board_take(self.board, self.space, MOST_FRAME, ctypes.byref(self.stamp))) >= 0:
            frame = self.space.raw[:length]
            if length < FCS or zlib.crc32(frame[:-FCS]).to_bytes(FCS, "little") != frame[-FCS:]:
                self.bad_frames += 1
                continue
            frames.append((frame[:-FCS], self.stamp.value / 1e12))
        return frames

    def close(self) -> None:
        if self.board:
            self.lib.board_free(self.board)
            self.board = None
