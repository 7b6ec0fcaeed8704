"""The boards netblt builds for, and the top that puts a NetbltNode on each.

amaranth-boards' platform files are the pin and IO-standard source; constraints/<board>.lpf
adds what they lack (the PHY's receive clock). Each board sizes the engine's buffer
slots to the block RAM LiteEth leaves, and has a geometry for its slots in its DRAM
(``dram_slots``: a long path's worth), which ``netblt sim-board --slots dram`` runs on
LiteDRAM's model of the board's chip, and the Colorlight's bitstream builds with
``--slots dram`` on its own PHY (hw/litedram_core.py; the Versa's too, with
``--untried``, until its read levelling has run on a board). Both run the engine at 50 MHz,
the Colorlight's DRAM build at 45: at 40 MHz LiteEth's receive side could not take
64-byte frames back to back (the Ethernet benchmark saw frames overrun and spliced,
caught by NETBLT's checksums); at 42 and 45 it took every one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import io, stream, wiring
from amaranth_boards.colorlight_5a75b_r7_0 import Colorlight_5A75B_R70Platform
from amaranth_boards.versa_ecp5 import VersaECP5Platform

from ..formats.boards import BUILDS
from ..formats.host_link import LINK_PORT
from ..formats.registers import BOARD_NAMES
from ..gateware.config import DramGeometry, EngineConfig
from ..gateware.host_link import INTAKE_WORDS
from .clocking import SystemClock
from .litedram import BoardDram
from .litedram_core import CHIPS
from ..formats.boards import GATEWAY, IP_ADDRESS, MAC_ADDRESS, NETMASK
from .mdio import MdioLinkMonitor
from .node import NetbltNode

RGMII_DATA_PINS = ("tx_clk", "tx_ctl", "tx_data", "rx_clk", "rx_ctl", "rx_data")
"""Requested raw (dir="-"): LiteEth's own DDR and delay primitives sit on them."""
ACTIVITY_HOLD_S = 0.03
"""How long the activity LED stays changed after a packet, so a single one shows."""


@dataclass(frozen=True)
class Board:
    name: str
    platform: type
    clock: str
    """The oscillator resource the PLL starts from."""
    clock_hz: float
    config: EngineConfig
    phy_address: int
    leds: tuple[int, ...]
    """LED indices for link and activity; one LED does both (on: link; blinks: activity)."""
    cable: str
    """openFPGALoader's cable: the Versa's own FT2232H; the Colorlight needs an external one."""
    chip: str
    """The board's DRAM, as hw/litedram_core.CHIPS names it."""
    dram_slots: EngineConfig
    """The engine with its slots in that DRAM: each way's slots fill half the chip
    (the core's geometry is added when it is generated)."""
    ping: bool = True
    """The board answers ping (LiteEth's ICMP echo)."""
    dram_ping: bool = True
    """The build with its slots in DRAM answers ping: the Colorlight's does not, as it
    needs those 1,500 LUTs to route LiteDRAM beside the engine."""
    link_intake_words: int = INTAKE_WORDS
    """The host link's request buffer; the Colorlight has EBR for 2048 words only, too
    few for a 9000-byte datagram (the CLI's host link sends 1500-byte ones)."""
    seeds: tuple[int, ...] = (1, 2, 3, 4)
    """nextpnr placement seeds to try, in order, keeping the first that meets timing: on
    the nearly full Colorlight, LiteEth's clock-crossing paths at 125 MHz land anywhere
    from 115 to 139 MHz with placement alone. The build is reproducible, so the seed that
    meets timing is the same on every machine; put it first."""
    dram_seeds: tuple[int, ...] = ()
    """The seeds for the build with its slots in DRAM, where they differ (empty: ``seeds``)."""

    @property
    def number(self) -> int:
        """What the BOARD register shows a host."""
        return next(n for n, name in BOARD_NAMES.items() if name == self.name)

    def built(self, slots: str) -> Board:
        """The board as its build with slots in ``slots`` has it: with them in DRAM, its
        ``config`` is ``dram_slots`` (the DRAM core's geometry still to add), with the
        DRAM build's own seeds where it has them."""
        if slots != "dram":
            return self
        return replace(self, config=self.dram_slots, ping=self.dram_ping, seeds=self.dram_seeds or self.seeds)


BOARDS = {board.name: board for board in (
    Board("colorlight_5a75b", Colorlight_5A75B_R70Platform, "clk25", 25e6,
          EngineConfig(**BUILDS["colorlight_5a75b"]["block"].fields()), phy_address=0,
          leds=(0,), cable="ft232", chip="colorlight",
          # The DRAM build's engine at 45 MHz: with LiteDRAM beside it the part is 86% full, and at
          # 50 MHz the engine missed by 8-13% whatever was cut. 45 MHz still takes 64-byte
          # frames back to back (docs/benchmarks.md), and the SDRAM, not the engine, limits
          # the board (1.2 Gb/s of reads and writes together).
          dram_slots=EngineConfig(**BUILDS["colorlight_5a75b"]["dram"].fields(), counter_delay=2),
          dram_ping=False, link_intake_words=2048,
          seeds=(5, 4),  # 5 meets both clocks (engine 50.3 MHz, Ethernet 149.3, 88% of the
                         # LUT4s, 14 min beside another placement) since the executor's push hold;
                         # 4 misses by 1% (49.5 MHz), 3 and 1 still routing after 15 and 18 min;
                         # router2 finished 3 and 4 in 12 min but at 43 and 41 MHz:
                         # make test-bitstream builds 5
          dram_seeds=(13, 5)),  # since the receive path's reader seeds 4-12 miss (5 closest
                                # but 13: the Ethernet clock alone at 119.1 MHz); 13 met all
                                # three (engine 46.3 MHz, Ethernet 125.08, SDRAM 75.8) until
                                # keep_frame_errors, and misses since (engine 44.34 of 45): to
                                # be chosen again (docs/benchmarks.md)
    Board("versa_ecp5", VersaECP5Platform, "clk100", 100e6,
          EngineConfig(**BUILDS["versa_ecp5"]["block"].fields()), phy_address=0, leds=(0, 1),
          cable="ft2232", chip="versa",
          # The DRAM build has the pattern source and the source port (data born on the board)
          # and not the pattern checker: with the checker, seed 1's router2 stalled near 300
          # overused wires for 200 iterations. Seed 1 (the first of ``seeds``) meets every
          # clock: engine 54.8 MHz, Ethernet 187.5, DDR3 controller 64.5 of 50 (docs/benchmarks.md).
          dram_slots=EngineConfig(**BUILDS["versa_ecp5"]["dram"].fields())),
)}


def dram_pins(m: Module, platform, board: Board, dram: dict, oscillator) -> tuple[BoardDram, float | None]:
    """The board's DRAM pins for the described core, and the clock its ``dram`` domain
    needs (None for a core whose PHY makes its own from ``oscillator``); for a chip
    clocked from the ``dram`` domain, its clock pin driven from there."""
    phy = CHIPS[board.chip].board_phy
    pins = platform.request(phy.resource, 0, dir="-")
    if phy.own_clocks:
        return BoardDram(pins, phy, oscillator), None
    board_dram = BoardDram(pins, phy)
    # The chip's clock half a cycle after the controller's: the IO registers' outputs
    # settle before its rising edge, its data before theirs.
    m.submodules.sdram_clock = clock = io.DDRBuffer("o", board_dram.pins.clk, o_domain="dram")
    m.d.comb += [clock.o[0].eq(0), clock.o[1].eq(1)]
    return board_dram, dram["clock_hz"]


class BoardTop(Elaboratable):
    """A NetbltNode on ``board``'s pins; with ``dram`` (the description of a LiteDRAM
    core with the board's PHY, hw/litedram_core.py) its slots are in the board's DRAM.
    ``source``, if given, makes the source port's feed from the module and the platform
    (a user's digitizer on the board's pins; docs/source-port.md); else the built-in
    stamp source feeds it. ``sink``, if given, takes the sink port's stream with the
    module and the platform (a user's gateware; docs/sink-port.md); else every word
    drained is dropped, the pattern checker watching where built."""

    def __init__(self, board: Board, ip_address: str = IP_ADDRESS, link_port: int = LINK_PORT,
                 mac_address: str = MAC_ADDRESS, netmask: str = NETMASK, gateway: str = GATEWAY,
                 dram: dict | None = None, source: Callable[[Module, object], stream.Interface] | None = None,
                 sink: Callable[[Module, object, stream.Interface], None] | None = None) -> None:
        self.board, self.ip_address, self.link_port, self.mac_address = board, ip_address, link_port, mac_address
        self.netmask, self.gateway, self.dram, self.source, self.sink = netmask, gateway, dram, source, sink

    def elaborate(self, platform) -> Module:
        board = self.board.built("block" if self.dram is None else "dram")
        config = board.config
        m = Module()
        oscillator = platform.request(board.clock, 0)
        board_dram, dram_hz = None, None
        if self.dram is not None:
            config = replace(config, dram=DramGeometry.of(self.dram))
            board_dram, dram_hz = dram_pins(m, platform, board, self.dram, oscillator.i)
        m.submodules.clock = SystemClock(oscillator.i, board.clock_hz, config.clock_hz, dram_hz)

        rgmii = platform.request("eth_rgmii", 0, dir={name: "-" for name in RGMII_DATA_PINS})
        m.submodules.node = node = NetbltNode(config, "rgmii", rgmii, self.ip_address, self.link_port,
                                              self.mac_address, board.number, self.netmask, self.gateway,
                                              board.link_intake_words, board_dram, self.source is not None,
                                              self.sink is not None)
        if self.source is not None:
            if not config.take:
                raise ValueError(f"{board.name}'s build has no source port (formats/boards.py: take=False)")
            wiring.connect(m, self.source(m, platform), node.source)
        if self.sink is not None:
            if not config.sink:
                raise ValueError(f"{board.name}'s build has no sink port (formats/boards.py: sink=False)")
            self.sink(m, platform, node.sink)
        m.submodules.mdio = mdio = MdioLinkMonitor(board.phy_address, reset_cycles=config.clock_hz // 100)
        m.d.comb += node.link_up.eq(mdio.link)
        m.d.comb += [rgmii.rst.o.eq(mdio.phy_reset), rgmii.mdc.o.eq(mdio.mdc),
                     rgmii.mdio.o.eq(mdio.mdio_o), rgmii.mdio.oe.eq(mdio.mdio_oe), mdio.mdio_i.eq(rgmii.mdio.i)]

        hold = int(ACTIVITY_HOLD_S * config.clock_hz)
        recent = Signal(range(hold + 1))
        with m.If(node.activity):
            m.d.sync += recent.eq(hold)
        with m.Elif(recent != 0):
            m.d.sync += recent.eq(recent - 1)
        leds = [platform.request("led", index) for index in board.leds]
        if len(leds) == 1:
            m.d.comb += leds[0].o.eq(mdio.link ^ (recent != 0))
        else:
            m.d.comb += [leds[0].o.eq(mdio.link), leds[1].o.eq(recent != 0)]
        return m
