"""Everything a board runs, less its clocks and pins: engine, host link, LiteEth, and
with the slots in DRAM the LiteDRAM core (its controller on the ``dram`` domain).

The board tops (hw/boards.py) put this on RGMII pins; Verilator runs it on GMII
(``phy="gmii"``) so the integrated tests exchange real Ethernet frames with the very
logic a board runs, the host reaching the engine only over the host link.
"""

from __future__ import annotations

import ipaddress

from amaranth.hdl import Cat, Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats.host_link import CONTROL_MOST, LINK_PORT
from ..gateware.config import EngineConfig
from ..gateware.engine import Engine
from ..gateware.host_link import INTAKE_WORDS, HostLink
from ..gateware.link_executor import DOWNLOAD_QUEUE, STAGED_DOWNLOAD_QUEUE, BoardIdentity
from ..gateware.sink_port import sink_word
from ..gateware.source_port import source_word
from ..gateware.stream_buffer import StreamBuffer
from ..gateware.streams import ip_payload
from .litedram import RECEIVE_PORT, TRANSMIT_PORT, BoardDram, LiteDram
from .liteeth import GMII, LiteEthCore
from ..formats.boards import GATEWAY, IP_ADDRESS, MAC_ADDRESS, NETMASK
from .liteeth_core import DATA_WIDTH, parse_mac


class NetbltNode(wiring.Component):
    """``activity`` pulses for each packet in or out; ``link_up`` is the PHY's link (tied
    high in simulation); ``gmii`` exists for ``phy="gmii"``. ``board`` is the number
    the BOARD register shows (0: simulation). ``netmask`` and ``gateway`` are the
    routing registers' values after reset (gateway 0.0.0.0: every destination is ARPed).
    ``intake_words`` is the host link's request buffer (a 9000-byte datagram's payload is 2243 words).
    With the configuration's slots in DRAM, ``dram_ready`` rises when the core's init
    sequence has run (the engine's STATE shows it too); ``board_dram`` is what a core
    with the board's PHY is wired to (hw/litedram.py). The engine's source port (TAKE) is
    fed by its built-in stamp source, or with ``external_source`` from ``source``, which
    the caller drives (docs/source-port.md); its sink port (DRAIN) goes nowhere (the
    pattern checker watching, where built), or with ``external_sink`` out of ``sink``, to
    the caller's gateware (docs/sink-port.md)."""

    def __init__(self, config: EngineConfig | None = None, phy: str = "gmii", rgmii=None,
                 ip_address: str = IP_ADDRESS, link_port: int = LINK_PORT, mac_address: str = MAC_ADDRESS,
                 board: int = 0, netmask: str = NETMASK, gateway: str = GATEWAY,
                 intake_words: int = INTAKE_WORDS, board_dram: BoardDram | None = None,
                 external_source: bool = False, external_sink: bool = False) -> None:
        self.config, self.board_dram = config or EngineConfig(), board_dram
        control_bytes = self.config.fifo_depth * self.config.beat_bytes
        if control_bytes > CONTROL_MOST:
            raise ValueError(f"the control FIFO holds packets of up to {control_bytes} bytes; an event push "
                             f"carries {CONTROL_MOST} at most (fifo_depth at most {CONTROL_MOST // self.config.beat_bytes})")
        self.ethernet = LiteEthCore(phy, rgmii)
        self.identity = BoardIdentity(int(ipaddress.IPv4Address(ip_address)), parse_mac(mac_address), board,
                                      int(ipaddress.IPv4Address(netmask)), int(ipaddress.IPv4Address(gateway)),
                                      self.config.clock_hz)
        self.link_port, self.intake_words = link_port, intake_words
        self.external_source = external_source and self.config.take
        self.external_sink = external_sink and self.config.sink
        members = {"activity": Out(1), "link_up": In(1, init=1)}
        if self.external_source:
            members["source"] = In(stream.Signature(source_word(self.config.data_width)))
        if self.external_sink:
            members["sink"] = Out(stream.Signature(sink_word(self.config.data_width)))
        if phy == "gmii":
            members["gmii"] = Out(wiring.Signature(GMII))
        if self.config.dram:
            members["dram_ready"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.engine = engine = Engine(self.config)
        if self.external_source:
            wiring.connect(m, wiring.flipped(self.source), engine.source)
        elif self.config.take:
            wiring.connect(m, engine.stamps, engine.source)
        if self.external_sink:
            wiring.connect(m, engine.sink, wiring.flipped(self.sink))
        elif self.config.sink:
            m.d.comb += engine.sink.ready.eq(1)
        queue = STAGED_DOWNLOAD_QUEUE if self.config.dram else DOWNLOAD_QUEUE
        m.submodules.link = link = HostLink(self.identity, self.link_port, self.intake_words, queue)
        m.submodules.ethernet = ethernet = self.ethernet
        wiring.connect(m, link.bus, engine.bus)
        wiring.connect(m, engine.net_tx, link.engine_tx)
        m.d.comb += [link.events_waiting.eq(engine.events_waiting), link.control_next.eq(engine.control_next),
                     link.download_level.eq(engine.download_level), link.upload_room.eq(engine.upload_room),
                     link.link_up.eq(self.link_up),
                     ethernet.netmask.eq(link.netmask), ethernet.gateway.eq(link.gateway)]
        # LiteEth's handshakes are combinational deep inside it: cut them at its edge.
        m.submodules.to_network = to_network = StreamBuffer(ip_payload(DATA_WIDTH))
        m.submodules.from_network = from_network = StreamBuffer(ip_payload(DATA_WIDTH))
        wiring.connect(m, link.net_tx, to_network.input)
        wiring.connect(m, to_network.output, ethernet.tx)
        wiring.connect(m, ethernet.rx, from_network.input)
        wiring.connect(m, from_network.output, link.net_rx)
        wiring.connect(m, link.engine_rx, engine.net_rx)
        if self.config.dram:
            m.submodules.dram = dram = LiteDram(self.config.dram, self.board_dram)
            wiring.connect(m, engine.tx_dram, dram.ports[TRANSMIT_PORT])
            wiring.connect(m, engine.rx_dram, dram.ports[RECEIVE_PORT])
            m.d.comb += [engine.dram_ready.eq(dram.dram_ready), self.dram_ready.eq(dram.dram_ready)]
            if self.config.dram.phy:
                wiring.connect(m, engine.dram_csr, dram.csr)
        if hasattr(self, "gmii"):
            wiring.connect(m, wiring.flipped(self.gmii), ethernet.gmii)
        # Counted on this side of the buffers: LiteEth's ready is a long path of its own.
        ends = [to_network.input, from_network.output]
        m.d.sync += self.activity.eq(Cat(s.valid & s.ready & s.payload.last for s in ends).any())
        return m
