"""The generated LiteDRAM core's outside, as data: its native ports, its command
counters, and how each board PHY meets the board's pins. hw/litedram_core.py (LiteX)
generates the core to it and hw/litedram.py (Amaranth) instantiates the core from it.
It imports no LiteX: testbenches read it, and each simulation that imported LiteX
through it took 1.3 s more to start."""

from __future__ import annotations

from dataclasses import dataclass

PORTS = 2
"""One native port per slot store: the transmit slots' and the receive slots'."""
COMMANDS = {"activate": (0, 1, 1), "read": (1, 0, 1), "write": (1, 0, 0), "precharge": (0, 1, 0), "refresh": (0, 0, 1)}
"""Each DFI command the counters count, by its (RAS#, CAS#, WE#) with CS# low (JEDEC's
truth table, the same for SDR and DDR3)."""
SDR_PADS = {"a": "o", "ba": "o", "ras_n": "o", "cas_n": "o", "we_n": "o", "dq": "io"}
"""The SDR pins GENSDRPHY drives, each with its direction; the board ties the rest
(the Colorlight's CS# low, CKE high, DQM low), and its top drives the chip's clock."""
DDR3_PADS = {"a": "o", "ba": "o", "ras_n": "o", "cas_n": "o", "we_n": "o", "cs_n": "o", "cke": "o", "odt": "o",
             "reset_n": "o", "dm": "o", "dq": "io", "dqs_p": "io", "clk_p": "o"}
"""The DDR3 pins ECP5DDRPHY drives, each with its direction; of a differential pair the
P pin alone (its IO type makes the pair, as LiteX constrains it)."""


@dataclass(frozen=True)
class BoardPhy:
    """How a memory type's board PHY meets the board: decided here, once, for the core,
    the board top and the build."""

    resource: str
    """amaranth-boards' resource for the chip's pins."""
    prefix: str
    """LiteDRAM's name for them (its pads' prefix)."""
    pads: dict[str, str]
    own_clocks: bool
    """The core makes its clocks from the board's oscillator (ECP5DDRPHY's CRG); otherwise
    the board top gives it the controller's clock and drives the chip's."""
    needs_levelling: bool
    """Its reads need levelling before they land (the host does it, driver/dram_levelling.py)."""
    phases: int
    """DFI phases a controller cycle (GENSDRPHY 1:1, ECP5DDRPHY 1:2); the core checks it
    against the PHY's own settings."""


BOARD_PHYS = {"SDR": BoardPhy("sdram", "sdram", SDR_PADS, own_clocks=False, needs_levelling=False, phases=1),
              "DDR3": BoardPhy("ddr3", "ddram", DDR3_PADS, own_clocks=True, needs_levelling=True, phases=2)}
"""GENSDRPHY's and ECP5DDRPHY's, by LiteDRAM's memory type."""
COUNT_BITS = 32
"""Each command counter's width: free-running, wrapping."""
