"""The board top as Verilator sees it: the engine on LiteEth with a GMII PHY.

The same engine and LiteEth core as on a board, with LiteEth's GMII PHY instead of the
ECP5 RGMII one (no vendor primitives), so cocotbext-eth can exchange real Ethernet
frames with it. The register bus is a port: the testbench is the host.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from netblt.gateware.config import EngineConfig
from netblt.gateware.engine import Engine
from netblt.gateware.registers import RegisterBus

from .liteeth import GMII, LiteEthCore


class SimulationTop(wiring.Component):
    def __init__(self, config: EngineConfig | None = None) -> None:
        self.config = config or EngineConfig()
        super().__init__({"bus": In(RegisterBus()), "gmii": Out(wiring.Signature(GMII))})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.engine = engine = Engine(self.config)
        m.submodules.ethernet = ethernet = LiteEthCore("gmii")
        wiring.connect(m, wiring.flipped(self.bus), engine.bus)
        wiring.connect(m, engine.net_tx, ethernet.tx)
        wiring.connect(m, ethernet.rx, engine.net_rx)
        wiring.connect(m, wiring.flipped(self.gmii), ethernet.gmii)
        return m
