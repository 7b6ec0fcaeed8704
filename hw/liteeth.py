"""LiteEth's generated core (hw/liteeth_core.py) as an Amaranth component.

The engine has one IP-payload stream each way; LiteEth has one raw port per protocol.
Outgoing packets are steered by their ``protocol`` field, incoming ones merged a whole
packet at a time. LiteEth marks a packet's last byte with a one-hot ``last_be`` and
passes a short frame's Ethernet padding on; the engine's ``keep`` covers the IP
payload's lanes only, so both are converted here and nowhere else.
A received frame whose FCS failed carries ``error`` on its last beat: the engine drops
it as DROPPED_FRAME (without negotiated data checksums the FCS is all that guards the
data, so such a frame must never be accepted). So does a frame that carries bytes past
its IP datagram beyond a short frame's padding: ahead of LiteEth's receive clock crossing
and its FCS check, bytes are lost while the engine falls behind (the PHY cannot wait),
splicing the head of one frame onto the tail of the next. The FCS fails on a splice, but
LiteEth lost that flag on frames whose length is 0 or 3 modulo 4 (hw/liteeth_core.py
keep_frame_errors keeps it now), and trimming the padding left a datagram of the first
frame's length with the next frame's bytes in it: so a board receiving into DRAM under
sim-board delivered a buffer that failed its transfer's SHA-256 on CI (beside two shorter
splices dropped as DROPPED_LENGTH). Either check alone drops such a splice.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Instance, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..gateware.streams import ip_stream
from .liteeth_core import DATA_WIDTH, PROTOCOLS, STREAM_WIRES

LANES = DATA_WIDTH // 8
PADDED_PAYLOAD = 46 - 20
"""The IP payload bytes of a minimum frame (LiteEth takes only 20-byte IP headers): a
shorter datagram's frame is padded out to it, a longer one's carries no padding."""

GMII = {"rx_clk": In(1), "tx_clk": In(1), "reset": In(1), "rx_data": In(8), "rx_dv": In(1),
        "rx_er": In(1), "tx_data": Out(8), "tx_en": Out(1), "tx_er": Out(1)}
"""The simulation core's PHY side: GMII with both 125 MHz clocks from the testbench."""


class LiteEthCore(wiring.Component):
    """IP payloads to and from the network through LiteEth's PHY, MAC, ARP and IPv4.

    ``phy="gmii"`` puts the GMII wires in the signature (simulation); ``phy="rgmii"``
    takes the board's RGMII pins, requested with ``dir="-"`` so that LiteEth's own
    DDR and delay primitives sit on them. A packet with a protocol LiteEth has no port
    for is consumed and dropped (nothing in the design sends one). ``netmask`` and
    ``gateway`` route destinations beyond the subnet (hw/liteeth_core.py's Router).
    """

    def __init__(self, phy: str, rgmii=None) -> None:
        if phy not in ("gmii", "rgmii") or (phy == "rgmii") != (rgmii is not None):
            raise ValueError("LiteEthCore: phy is 'gmii', or 'rgmii' with the board's RGMII pins")
        self.phy = phy
        self._rgmii = rgmii
        members = {"tx": In(ip_stream(DATA_WIDTH)), "rx": Out(ip_stream(DATA_WIDTH)),
                   "netmask": In(32), "gateway": In(32)}
        if phy == "gmii":
            members["gmii"] = Out(wiring.Signature(GMII))
        super().__init__(members)

    def elaborate(self, platform) -> Module:
        m = Module()
        ports: dict[str, object] = {"i_sys_clock": ClockSignal(), "i_sys_reset": ResetSignal(),
                                    "i_route_netmask": self.netmask, "i_route_gateway": self.gateway}
        ports.update(self._phy_ports())
        sources = []
        for protocol in PROTOCOLS:
            wires = {}
            for direction in ("sink", "source"):
                wires[direction] = {name: Signal(width, name=f"ip{protocol}_{direction}_{name}")
                                    for name, width in STREAM_WIRES}
                for name, signal in wires[direction].items():
                    towards_core = (name == "ready") == (direction == "source")
                    ports[f"{'i' if towards_core else 'o'}_ip{protocol}_{direction}_{name}"] = signal
            self._steer(m, protocol, wires["sink"])
            sources.append((protocol, wires["source"]))
        # A protocol LiteEth has no port for is consumed, so it cannot stall the link.
        routed = Cat(self.tx.payload.protocol == p for p in PROTOCOLS).any()
        with m.If(~routed):
            m.d.comb += self.tx.ready.eq(1)
        self._merge(m, sources)
        m.submodules.core = Instance("liteeth_core", **ports)
        return m

    def _phy_ports(self) -> dict[str, object]:
        if self.phy == "gmii":
            g = self.gmii
            return {"i_gmii_clocks_rx": g.rx_clk, "i_gmii_clocks_tx": g.tx_clk, "i_gmii_reset": g.reset,
                    "i_gmii_rx_data": g.rx_data, "i_gmii_rx_dv": g.rx_dv, "i_gmii_rx_er": g.rx_er,
                    "o_gmii_tx_data": g.tx_data, "o_gmii_tx_en": g.tx_en, "o_gmii_tx_er": g.tx_er}
        pins = self._rgmii
        return {"o_rgmii_clocks_tx": pins.tx_clk.io, "i_rgmii_clocks_rx": pins.rx_clk.io,
                "i_rgmii_rx_ctl": pins.rx_ctl.io, "i_rgmii_rx_data": pins.rx_data.io,
                "o_rgmii_tx_ctl": pins.tx_ctl.io, "o_rgmii_tx_data": pins.tx_data.io}

    def _steer(self, m: Module, protocol: int, sink: dict[str, Signal]) -> None:
        """The engine's packets of ``protocol`` to that LiteEth port."""
        beat = self.tx.payload
        mine = beat.protocol == protocol
        keep = beat.keep
        m.d.comb += [
            sink["valid"].eq(self.tx.valid & mine), sink["last"].eq(beat.last),
            sink["data"].eq(beat.data), sink["last_be"].eq(keep ^ (keep >> 1)),
            sink["length"].eq(beat.length), sink["ip_address"].eq(beat.address),
        ]
        with m.If(mine):
            m.d.comb += self.tx.ready.eq(sink["ready"])

    def _merge(self, m: Module, sources: list[tuple[int, dict[str, Signal]]]) -> None:
        """LiteEth's ports into the engine's one stream, a whole packet at a time."""
        owner = Signal(range(len(sources)))
        busy = Signal()
        chosen = Signal(range(len(sources)))
        m.d.comb += chosen.eq(owner)
        with m.If(~busy):
            for index, (_, source) in reversed(list(enumerate(sources))):
                with m.If(source["valid"]):
                    m.d.comb += chosen.eq(index)
        out = self.rx.payload
        offset = Signal(16)
        """Payload bytes before this beat: lanes past the IP length are Ethernet padding."""
        overhang, spliced = Signal(), Signal()
        """This beat, and an earlier one of the frame, carried bytes past the datagram that
        are not padding."""
        for index, (protocol, source) in enumerate(sources):
            with m.If(chosen == index):
                in_frame = Mux(source["last"], (source["last_be"] << 1) - 1, (1 << LANES) - 1)
                in_payload = Cat(offset + lane < source["length"] for lane in range(LANES))
                m.d.comb += [
                    self.rx.valid.eq(source["valid"]), source["ready"].eq(self.rx.ready),
                    out.data.eq(source["data"]), out.last.eq(source["last"]),
                    out.keep.eq(in_frame & in_payload),
                    overhang.eq((in_frame & ~in_payload).any() & (source["length"] >= PADDED_PAYLOAD)),
                    out.error.eq(source["last"] & (source["error"].any() | spliced | overhang)),
                    out.address.eq(source["ip_address"]), out.protocol.eq(protocol),
                    out.length.eq(source["length"]),
                ]
        with m.If(self.rx.valid & self.rx.ready):
            m.d.sync += [busy.eq(~out.last), owner.eq(chosen),
                         offset.eq(Mux(out.last, 0, offset + LANES)), spliced.eq(~out.last & (spliced | overhang))]
