"""LiteDRAM's generated core (hw/litedram_core.py) as an Amaranth component.

Its native ports, one per slot store, are streams in the engine's (``sync``) domain; the
DRAM's controller runs on the ``dram`` domain, which the board top or the testbench
provides, and LiteDRAM's FIFOs cross between the two. A core with the board's PHY takes
the chip's pins too, raw: its own IO registers and tristates sit on them. A core on
ECP5DDRPHY makes its controller's clock from the board's oscillator instead
(hw/litedram_core.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal, Value
from amaranth.lib import data, io, wiring
from amaranth.lib.wiring import In, Out

from ..gateware.config import DramGeometry
from ..gateware.dram_dma import NativePort
from ..gateware.register_bus import DramCsrBus
from .litedram_ports import COMMANDS, COUNT_BITS, PORTS, BoardPhy

TRANSMIT_PORT, RECEIVE_PORT = 0, 1
"""The core's port each side's store takes."""
BOARD_PIN_NAMES = {"ras_n": "ras", "cas_n": "cas", "we_n": "we", "cs_n": "cs", "cke": "clk_en", "reset_n": "rst",
                   "dqs_p": "dqs", "clk_p": "clk"}
"""amaranth-boards' names for LiteDRAM's pads where they differ (its active-low pins are
inverted, but requested raw they carry the core's own levels; of a differential pair the
core drives the P pin)."""
COMMAND_COUNTS = data.StructLayout({kind: COUNT_BITS for kind in COMMANDS})
"""The core's command counters (free-running, in the ``dram`` domain), as one value."""


@dataclass(frozen=True)
class BoardDram:
    """What a core with the board's PHY is wired to: the platform's resource for the
    chip (``phy.resource``), requested raw (``dir="-"``), and for a core that makes its
    own clocks the oscillator its PLL starts from."""

    pins: object
    phy: BoardPhy
    oscillator: Value | None = None

    def __post_init__(self) -> None:
        if self.phy.own_clocks and self.oscillator is None:
            raise ValueError(f"a core whose PHY makes its own clocks ({self.phy.resource}) needs the board's oscillator")

    def wires(self) -> dict[str, object]:
        """The core's pin ports, each to its platform port."""
        wires = {}
        for pad, direction in self.phy.pads.items():
            port = getattr(self.pins, BOARD_PIN_NAMES.get(pad, pad))
            wires[f"{direction}_{self.phy.prefix}_{pad}"] = port.p if isinstance(port, io.DifferentialPort) else port.io
        if self.phy.own_clocks:
            wires |= {"i_clk": self.oscillator, "i_rst": 0}
        return wires


class LiteDram(wiring.Component):
    """The core of ``geometry`` (its description's, ``DramGeometry.of``): ``ports`` for
    the stores, ``dram_ready`` once its init sequence has run (the name every top with a
    core gives it, which the testbenches wait for), and ``dram_commands`` counted.
    ``board``: what a core with the board's PHY is wired to."""

    def __init__(self, geometry: DramGeometry, board: BoardDram | None = None) -> None:
        self.board = board
        port = NativePort(geometry.address_bits, geometry.data_bits)
        super().__init__({"ports": In(port).array(PORTS), "dram_ready": Out(1), "dram_commands": Out(COMMAND_COUNTS),
                          **({"csr": In(DramCsrBus())} if geometry.phy else {})})

    def elaborate(self, platform) -> Module:
        m = Module()
        wires = {"i_engine_clock": ClockSignal(), "i_engine_reset": ResetSignal(), "o_init_done": self.dram_ready,
                 **{f"o_commands_{kind}": getattr(self.dram_commands, kind) for kind in COMMANDS}}
        for index, port in enumerate(self.ports):
            prefix = f"port{index}"
            wires |= {
                f"i_{prefix}_cmd_valid": port.cmd.valid, f"o_{prefix}_cmd_ready": port.cmd.ready,
                f"i_{prefix}_cmd_we": port.cmd.payload.we, f"i_{prefix}_cmd_addr": port.cmd.payload.addr,
                f"i_{prefix}_wdata_valid": port.wdata.valid, f"o_{prefix}_wdata_ready": port.wdata.ready,
                f"i_{prefix}_wdata_we": port.wdata.payload.we, f"i_{prefix}_wdata_data": port.wdata.payload.data,
                f"o_{prefix}_rdata_valid": port.rdata.valid, f"i_{prefix}_rdata_ready": port.rdata.ready,
                f"o_{prefix}_rdata_data": port.rdata.payload,
            }
        if hasattr(self, "csr"):
            wires |= {f"{'i' if member.flow == In else 'o'}_csr_{name}": getattr(self.csr, name)
                      for name, member in self.csr.signature.members.items()}
        if self.board is None or not self.board.phy.own_clocks:
            wires |= {"i_dram_clock": ClockSignal("dram"), "i_dram_reset": ResetSignal("dram")}
        if self.board is not None:
            wires |= self.board.wires()
        m.submodules.core = Instance("litedram_core", **wires)
        return m
