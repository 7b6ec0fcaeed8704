"""LiteDRAM's generated core (hw/litedram_core.py) as an Amaranth component.

Its native ports, one per slot store, are streams in the engine's (``sync``) domain; the
DRAM's controller runs on the ``dram`` domain, which the board top or the testbench
provides, and LiteDRAM's FIFOs cross between the two. A core with the board's PHY takes
the chip's pins too, raw: its own IO registers and tristates sit on them.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from netblt.gateware.config import DramGeometry
from netblt.gateware.dram_dma import NativePort

from .litedram_core import COMMANDS, COUNT_BITS, PORTS, SDR_PADS

TRANSMIT_PORT, RECEIVE_PORT = 0, 1
"""The core's port each side's store takes."""
BOARD_PIN_NAMES = {"ras_n": "ras", "cas_n": "cas", "we_n": "we"}
"""amaranth-boards' SDRAMResource names for LiteDRAM's SDR pads where they differ (its
active-low pins are inverted, but requested raw they carry the core's own levels)."""
COMMAND_COUNTS = data.StructLayout({kind: COUNT_BITS for kind in COMMANDS})
"""The core's command counters (free-running, in the ``dram`` domain), as one value."""


class LiteDram(wiring.Component):
    """The core of ``geometry`` (its description's, ``DramGeometry.of``): ``ports`` for
    the stores, ``dram_ready`` once its init sequence has run (the name every top with a
    core gives it, which the testbenches wait for), and ``dram_commands`` counted.
    ``pins``: the platform's ``sdram`` resource, requested raw (``dir="-"``), for a core
    with the board's SDR PHY."""

    def __init__(self, geometry: DramGeometry, pins=None) -> None:
        self.pins = pins
        port = NativePort(geometry.address_bits, geometry.data_bits)
        super().__init__({"ports": In(port).array(PORTS), "dram_ready": Out(1), "dram_commands": Out(COMMAND_COUNTS)})

    def elaborate(self, platform) -> Module:
        m = Module()
        wires = {"i_dram_clock": ClockSignal("dram"), "i_dram_reset": ResetSignal("dram"),
                 "i_engine_clock": ClockSignal(), "i_engine_reset": ResetSignal(), "o_init_done": self.dram_ready,
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
        if self.pins is not None:
            wires |= {f"{direction}_sdram_{name}": getattr(self.pins, BOARD_PIN_NAMES.get(name, name)).io
                      for name, direction in SDR_PADS.items()}
        m.submodules.core = Instance("litedram_core", **wires)
        return m
