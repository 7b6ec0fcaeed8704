"""Everything a board runs, less its clocks and pins: engine, management link, LiteEth.

The board tops (hw/boards.py) put this on RGMII pins; Verilator runs it on GMII
(``phy="gmii"``) so the integrated tests exchange real Ethernet frames with the very
logic a board runs, the host reaching the registers only through management datagrams.
"""

from __future__ import annotations

import ipaddress

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from netblt.driver.management import MANAGEMENT_PORT
from netblt.gateware.config import EngineConfig
from netblt.gateware.engine import Engine
from netblt.gateware.management import Management
from netblt.gateware.stream_buffer import StreamBuffer
from netblt.gateware.streams import ip_payload

from .liteeth import GMII, LiteEthCore
from .liteeth_core import DATA_WIDTH, IP_ADDRESS


class NetbltNode(wiring.Component):
    """``activity`` pulses for each packet in or out; ``gmii`` exists for ``phy="gmii"``."""

    def __init__(self, config: EngineConfig | None = None, phy: str = "gmii", rgmii=None,
                 ip_address: str = IP_ADDRESS, management_port: int = MANAGEMENT_PORT) -> None:
        self.config = config or EngineConfig()
        self.ethernet = LiteEthCore(phy, rgmii)
        self.ip_address = int(ipaddress.IPv4Address(ip_address))
        self.management_port = management_port
        members = {"activity": Out(1)}
        if phy == "gmii":
            members["gmii"] = Out(wiring.Signature(GMII))
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.engine = engine = Engine(self.config)
        m.submodules.management = management = Management(self.ip_address, self.management_port)
        m.submodules.ethernet = ethernet = self.ethernet
        wiring.connect(m, management.bus, engine.bus)
        wiring.connect(m, engine.net_tx, management.engine_tx)
        # LiteEth's handshakes are combinational deep inside it: cut them at its edge.
        m.submodules.to_network = to_network = StreamBuffer(ip_payload(DATA_WIDTH))
        m.submodules.from_network = from_network = StreamBuffer(ip_payload(DATA_WIDTH))
        wiring.connect(m, management.net_tx, to_network.input)
        wiring.connect(m, to_network.output, ethernet.tx)
        wiring.connect(m, ethernet.rx, from_network.input)
        wiring.connect(m, from_network.output, management.net_rx)
        wiring.connect(m, management.engine_rx, engine.net_rx)
        if hasattr(self, "gmii"):
            wiring.connect(m, wiring.flipped(self.gmii), ethernet.gmii)
        # Counted on this side of the buffers: LiteEth's ready is a long path of its own.
        ends = [to_network.input, from_network.output]
        m.d.sync += self.activity.eq(Cat(s.valid & s.ready & s.payload.last for s in ends).any())
        return m
