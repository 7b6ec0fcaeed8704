"""The LiteEth core the board tops instantiate: PHY, MAC, ARP, IPv4, ICMP echo and raw IP ports.

    python -m netblt.hw.liteeth_core --phy rgmii --output build/colorlight_5a75b/liteeth_core.v

LiteEth's own generator (liteeth_gen) offers wishbone, AXI-lite and UDP cores only; the
engine speaks IP payloads, so this composes the same LiteEth classes into a core with one
raw IP port per protocol: 30 (native NETBLT) and 17 (NETBLT-in-UDP and the host
link, whose UDP headers the engine and the link build and check themselves). ``--phy rgmii`` is the
ECP5 RGMII PHY the boards use; ``--phy gmii`` is LiteEth's GMII PHY without vendor
primitives, for Verilator and cocotbext-eth. The core is generated at build time into
build/, never committed. Ports are ``sys_clock``/``sys_reset``, the PHY pins, and per
protocol p ``ip<p>_sink_*`` (to the network) and ``ip<p>_source_*`` (from it).
``--no-ping`` is for a board short of LUTs: no ICMP echo, 1,500 fewer LUTs on the
Colorlight. The MAC checks and adds the CRC, padding and preamble at 32 bits in the
system clock, not at the PHY's 8 bits in its 125 MHz clocks (LiteEth's default): that
takes 1,000 more LUTs, but at 8 bits the crowded Colorlight's transmit chain missed its
125 MHz by up to 34%.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from litex.build.generic_platform import Pins, Subsignal
from litex.build.io import CRG
from litex.build.lattice.platform import LatticePlatform
from litex.gen import LiteXModule
from liteeth.common import convert_ip, stream
from liteeth.core.arp import LiteEthARP
from liteeth.core.icmp import LiteEthICMP
from liteeth.core.ip import LiteEthIP
from liteeth.mac import LiteEthMAC
from liteeth.phy.ecp5rgmii import LiteEthPHYRGMII
from liteeth.phy.gmii import LiteEthPHYGMIIRX, LiteEthPHYGMIITX
from migen import ClockDomain, ClockDomainsRenamer, If, Mux, Signal

from ..formats import rfc998 as L
from ..formats.boards import IP_ADDRESS, MAC_ADDRESS
from ..gateware.config import EngineConfig
from ..formats.rfc998 import UDP_PROTOCOL
from .litex_core import DEVICE, run_generator, write_verilog

PROTOCOLS = (L.IP_PROTOCOL, UDP_PROTOCOL)
"""Native NETBLT (RFC 998's protocol number) and UDP."""
DATA_WIDTH = 32
STREAM_WIRES = (("valid", 1), ("ready", 1), ("last", 1), ("data", DATA_WIDTH), ("last_be", DATA_WIDTH // 8),
                ("error", DATA_WIDTH // 8), ("length", 16), ("ip_address", 32))
"""A LiteEth IPv4 user stream's wires, each way: ``ip<p>_sink_<wire>``, ``ip<p>_source_<wire>``."""


def port_pins(protocol: int) -> tuple:
    """One raw IP port's wires: a LiteEth IPv4 user stream each way."""
    def stream(direction: str) -> list[Subsignal]:
        return [Subsignal(f"{direction}_{name}", Pins(width)) for name, width in STREAM_WIRES]
    return (f"ip{protocol}", 0, *stream("sink"), *stream("source"))


COMMON_PINS = [("sys_clock", 0, Pins(1)), ("sys_reset", 0, Pins(1)),
               ("route", 0, Subsignal("netmask", Pins(32)), Subsignal("gateway", Pins(32)))]
RGMII_PINS = [
    ("rgmii_clocks", 0, Subsignal("tx", Pins(1)), Subsignal("rx", Pins(1))),
    ("rgmii", 0, Subsignal("rx_ctl", Pins(1)), Subsignal("rx_data", Pins(4)),
     Subsignal("tx_ctl", Pins(1)), Subsignal("tx_data", Pins(4))),
]
GMII_PINS = [
    ("gmii_clocks", 0, Subsignal("tx", Pins(1)), Subsignal("rx", Pins(1))),
    ("gmii", 0, Subsignal("rx_dv", Pins(1)), Subsignal("rx_er", Pins(1)), Subsignal("rx_data", Pins(8)),
     Subsignal("tx_en", Pins(1)), Subsignal("tx_er", Pins(1)), Subsignal("tx_data", Pins(8)),
     Subsignal("reset", Pins(1))),
]


class SimulationGMII(LiteXModule):
    """LiteEth's GMII transmitter and receiver on clocks that come in as pins.

    LiteEth's GMII clocking uses vendor buffers and a DDR output; a simulator drives
    both 125 MHz clocks itself, so only the data path is LiteEth's.
    """

    dw = 8
    tx_clk_freq = rx_clk_freq = 125e6

    def __init__(self, clock_pads, pads) -> None:
        self.crg = LiteXModule()
        self.crg.cd_eth_rx = ClockDomain()
        self.crg.cd_eth_tx = ClockDomain()
        self.comb += [self.crg.cd_eth_rx.clk.eq(clock_pads.rx), self.crg.cd_eth_tx.clk.eq(clock_pads.tx),
                      self.crg.cd_eth_rx.rst.eq(pads.reset), self.crg.cd_eth_tx.rst.eq(pads.reset)]
        self.tx = ClockDomainsRenamer("eth_tx")(LiteEthPHYGMIITX(pads))
        self.rx = ClockDomainsRenamer("eth_rx")(LiteEthPHYGMIIRX(pads))
        self.sink, self.source = self.tx.sink, self.rx.source


class Router(LiteXModule):
    """LiteEth's IPv4 transmitter as it asks the ARP table, with routing added: a destination
    beyond the board's subnet (``netmask``) is looked up as ``gateway`` instead, so its
    frames go to the router. LiteEth 2024.12 ARPs every destination directly, which
    reaches nothing past the subnet. With no gateway (0) every destination is asked for."""

    def __init__(self, table, ip_address: int, netmask, gateway) -> None:
        self.request = stream.Endpoint([("ip_address", 32)])
        self.response = table.response
        destination = self.request.ip_address
        nearby = (destination & netmask) == (ip_address & netmask)
        self.comb += [self.request.connect(table.request, omit={"ip_address"}),
                      table.request.ip_address.eq(Mux(nearby | (gateway == 0), destination, gateway))]


def keep_frame_errors(depacketizer) -> None:
    """LiteEth 2024.12's Depacketizer gives each beat out the ``error`` of the beat it takes
    in. Stripping the MAC's 14-byte header from 32-bit beats, a frame whose FCS-stripped
    length is 0 or 3 modulo 4 sends its last bytes in a beat of their own, after
    the last beat in was taken: the frame-check error was lost (top_tb), and a frame the
    FCS failed, spliced in the receive clock crossing, reached the engine as good. The
    error of the last beat in is held until the last beat out has gone."""
    sink, source = depacketizer.sink, depacketizer.source
    held = Signal(len(sink.error))
    depacketizer.sync += [If(sink.valid & sink.ready & sink.last, held.eq(sink.error)),
                          If(source.valid & source.ready & source.last, held.eq(0))]
    depacketizer.comb += source.error.eq(sink.error | held)  # after LiteEth's own: this one holds


class LiteEthSoc(LiteXModule):
    def __init__(self, platform, phy: str, mac_address: int, ip_address: str, clock_hz: float,
                 arp_timescale: float = 1, ping: bool = True) -> None:
        self.crg = CRG(platform.request("sys_clock"), platform.request("sys_reset"))
        if phy == "rgmii":
            # PHY reset and MDIO are the board top's (Amaranth), not LiteEth's CSRs.
            self.ethphy = LiteEthPHYRGMII(platform.request("rgmii_clocks"), platform.request("rgmii"),
                                          with_hw_init_reset=False)
        else:
            self.ethphy = SimulationGMII(platform.request("gmii_clocks"), platform.request("gmii"))
        # LiteEthIPCore's parts, with the Router between the IP transmitter and the ARP table.
        address = convert_ip(ip_address)
        # The transmit clock crossing's output is registered (tx_cdc_buffered): unbuffered, its
        # read pointer's compare, the 32-to-8 converter and the next read address made one
        # 125 MHz path that the nearly full Colorlight missed by 2-8%. It is 16 words deep, one
        # ECP5 LUT RAM: at 32 a mux of two followed the read, and that path missed by 3-6% on
        # six seeds of seven (at 16: 149-157 MHz). The writer (32 bits at 50 MHz or more)
        # outpaces the wire's reader (8 bits at 125 MHz), so the crossing is full whatever its
        # depth while a frame goes out (frames still leave at the minimum gap: docs/benchmarks.md).
        self.mac = LiteEthMAC(self.ethphy, dw=DATA_WIDTH, interface="crossbar", hw_mac=mac_address,
                              with_sys_datapath=True, tx_cdc_buffered=True, tx_cdc_depth=16)
        keep_frame_errors(self.mac.depacketizer)
        # LiteEth's ARP times (cache cleared each second, requests repeated each 100 ms) run
        # ``arp_timescale`` times faster in a core built to measure them in simulation.
        self.arp = LiteEthARP(self.mac, mac_address, address, int(clock_hz / arp_timescale), dw=DATA_WIDTH)
        route = platform.request("route")
        self.router = Router(self.arp.table, address, route.netmask, route.gateway)
        self.ip = LiteEthIP(self.mac, mac_address, address, self.router, dw=DATA_WIDTH)
        if ping:
            self.icmp = LiteEthICMP(self.ip, address, dw=DATA_WIDTH)
        for protocol in PROTOCOLS:
            port = self.ip.crossbar.get_port(protocol, dw=DATA_WIDTH)
            pins = platform.request(f"ip{protocol}")
            sink, source = port.sink, port.source
            self.comb += [
                sink.valid.eq(pins.sink_valid), pins.sink_ready.eq(sink.ready),
                sink.last.eq(pins.sink_last), sink.data.eq(pins.sink_data),
                sink.last_be.eq(pins.sink_last_be), sink.error.eq(pins.sink_error),
                sink.length.eq(pins.sink_length), sink.ip_address.eq(pins.sink_ip_address),
                sink.protocol.eq(protocol),
                pins.source_valid.eq(source.valid), source.ready.eq(pins.source_ready),
                pins.source_last.eq(source.last), pins.source_data.eq(source.data),
                pins.source_last_be.eq(source.last_be), pins.source_error.eq(source.error),
                pins.source_length.eq(source.length), pins.source_ip_address.eq(source.ip_address),
            ]


def parse_mac(text: str) -> int:
    parts = text.split(":")
    if len(parts) != 6 or not all(len(p) == 2 for p in parts):
        raise ValueError(f"MAC address {text!r}: expected six hexadecimal bytes, e.g. {MAC_ADDRESS}")
    try:
        return int("".join(parts), 16)
    except ValueError:
        raise ValueError(f"MAC address {text!r}: expected six hexadecimal bytes, e.g. {MAC_ADDRESS}") from None


def generate(phy: str, mac_address: str, ip_address: str, clock_hz: float, output: Path,
             arp_timescale: float = 1, ping: bool = True) -> Path:
    """Writes the core's Verilog to ``output`` (module ``liteeth_core``), the same text
    every time (hw/litex_core.py)."""
    run_generator(__name__, ["--phy", phy, "--mac", mac_address, "--ip", ip_address, "--clock-hz", str(clock_hz),
                             "--arp-timescale", str(arp_timescale), "--output", str(output),
                             *([] if ping else ["--no-ping"])])
    return output


def write_core(phy: str, mac_address: int, ip_address: str, clock_hz: float, output: Path,
               arp_timescale: float = 1, ping: bool = True) -> Path:
    pins = COMMON_PINS + (RGMII_PINS if phy == "rgmii" else GMII_PINS) + [port_pins(p) for p in PROTOCOLS]
    platform = LatticePlatform(DEVICE, pins, toolchain="trellis")
    write_verilog(platform, LiteEthSoc(platform, phy, mac_address, ip_address, clock_hz, arp_timescale, ping),
                  "liteeth_core", output)
    return output


def simulation_core(directory: Path, clock_hz: int = EngineConfig().clock_hz, arp_timescale: int = 1) -> Path:
    """The GMII core with the default addresses, as the integrated simulation runs it."""
    suffix = f"_arp{arp_timescale}x" if arp_timescale != 1 else ""
    return generate("gmii", MAC_ADDRESS, IP_ADDRESS, clock_hz,
                    directory / f"liteeth_gmii_{clock_hz // 1_000_000}mhz{suffix}.v", arp_timescale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phy", choices=("rgmii", "gmii"), required=True)
    parser.add_argument("--mac", default=MAC_ADDRESS, help="the board's MAC address")
    parser.add_argument("--ip", default=IP_ADDRESS, help="the board's IPv4 address")
    parser.add_argument("--clock-hz", type=float, default=EngineConfig().clock_hz, help="the system clock")
    parser.add_argument("--arp-timescale", type=float, default=1, help="run LiteEth's ARP timers this many times "
                        "faster (only to measure them in simulation)")
    parser.add_argument("--no-ping", dest="ping", action="store_false", help="no ICMP echo (about 1,500 fewer LUTs)")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        mac = parse_mac(args.mac)
        ipaddress.IPv4Address(args.ip)
    except ValueError as error:
        parser.error(str(error))
    print(write_core(args.phy, mac, args.ip, args.clock_hz, args.output, args.arp_timescale, args.ping))
    return 0


if __name__ == "__main__":
    sys.exit(main())
