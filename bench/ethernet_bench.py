"""The Ethernet benchmark: the integrated top on GMII, and the boards' bitstreams.

    python -m netblt.bench.ethernet_bench            (make bench-ethernet)
    python -m netblt.bench.ethernet_bench --slots dram

For each board's design (its engine sizes and system clock), runs
bench/ethernet_bench_tb.py under Verilator: unpaced transmission timed at the GMII
wires against the gigabit goodput for each frame size, and DATA frames received back to
back at the minimum gap. Then builds each board's bitstream (hw/build.py) for its Fmax
and utilisation, unless --no-boards. Prints tables; docs/benchmarks.md quotes them.
With ``--slots dram`` each board's design has its slots in its DRAM, on LiteDRAM's model
of its chip (sim/rtl/sim_board.py's design), and the wire is measured the same way with
PACKETS_IN_DRAM packets a buffer; the host link's table and the bitstreams are left out
(its bulk case moves every slot whole, 64 MiB on the Versa).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..formats import host_link as F
from ..formats.boards import IP_ADDRESS, MAC_ADDRESS
from ..gateware.config import EngineConfig
from ..host.units import positive
from ..hw import build, liteeth_core
from ..hw.boards import BOARDS, Board
from ..hw.node import NetbltNode
from ..sim.rtl import hdl
from ..sim.rtl.sim_board import design

MODULE = "netblt.bench.ethernet_bench_tb"
CASES = "1456:ip,1448:udp,532:ip,524:udp,64:ip,64:udp"
"""A 1500-byte MTU, a 576-byte one, and 64-byte payloads, each native and in UDP."""
PACKETS_IN_DRAM = 8
"""Packets a buffer with the slots in DRAM: 128 frames timed over the Versa's 16 slots."""


def frame_cases(text: str) -> str:
    """``--cases`` checked: payload:ip or payload:udp, comma-separated (the testbench
    reads the text itself)."""
    for case in text.split(","):
        size, _, carriage = case.partition(":")
        if not size.isdigit() or int(size) < 1 or carriage not in ("ip", "udp"):
            raise argparse.ArgumentTypeError(f"{case!r} is not payload:ip or payload:udp, as in 1456:ip")
    return text


def clocked(board: Board) -> str:
    """A board run at another clock than its own (``--clock-mhz``) builds apart: "_45mhz"."""
    return hdl.clock_suffix(board.config.clock_hz, BOARDS[board.name].config.clock_hz)


def simulate(board: Board, results: Path, cases: str, slots: str = "block") -> dict:
    """The board's design (its engine sizes and system clock) on GMII, its slots in
    block RAM or in its DRAM."""
    chosen = design(board, slots)
    config = chosen.config
    env = {"NETBLT_BENCH_RESULTS": str(results), "NETBLT_BENCH_CASES": cases,
           "NETBLT_TB_CLOCK_HZ": str(config.clock_hz), "NETBLT_TB_SLOT_BYTES": str(config.slot_bytes)}
    if chosen.dram:
        benches = ("bench_transmit", "bench_receive")
        env |= {"NETBLT_TB_DRAM_DESCRIPTION": json.dumps(chosen.dram), "NETBLT_BENCH_PACKETS": str(PACKETS_IN_DRAM),
                "NETBLT_TB_TX_SLOTS": str(config.tx_slots), "NETBLT_TB_RX_SLOTS": str(config.rx_slots)}
    else:
        benches = ("bench_transmit", "bench_receive", "bench_link")
        # Jumbo datagrams where the board's intake holds one (not the Colorlight's).
        env["NETBLT_BENCH_MTUS"] = "1500,9000" if board.link_intake_words >= (9000 - F.IP_UDP_HEADERS) // 4 else "1500"
    runner = hdl.build(chosen.node, chosen.name, chosen.sources)
    for case in benches:
        hdl.run(runner, chosen.name, MODULE, Path(__file__).parent, testcase=case, env=env)
    return {"config": config, **json.loads(results.read_text())}


ARP_TIMESCALE = 10_000
"""LiteEth's ARP times run this much faster in the ARP measurement: its cache clears
every 100 us of simulated time instead of every second."""


def simulate_arp(results: Path) -> dict:
    """The simulation design with LiteEth's ARP timers sped up (bench/ethernet_bench_tb.py
    bench_arp)."""
    config, name = EngineConfig(data_width=32), "node_arp"
    core = liteeth_core.simulation_core(hdl.BUILD / "liteeth", config.clock_hz, ARP_TIMESCALE)
    runner = hdl.build(NetbltNode(config), name, [core])
    env = {"NETBLT_BENCH_RESULTS": str(results), "NETBLT_TB_CLOCK_HZ": str(config.clock_hz),
           "NETBLT_TB_SLOT_BYTES": str(config.slot_bytes), "NETBLT_BENCH_ARP_TIMESCALE": str(ARP_TIMESCALE)}
    hdl.run(runner, name, MODULE, Path(__file__).parent, testcase="bench_arp", env=env)
    return json.loads(results.read_text())["arp"]


def report_arp(arp: dict, console: Console) -> None:
    table = Table(title=f"LiteEth's ARP cache clear, {ARP_TIMESCALE:,} times faster: every "
                        f"{arp['clear_ns'] / 1e3:g} us of simulated time")
    for column in ("DATA frames", "over us", "ARP requests meanwhile", "DATA gaps waiting for ARP",
                   "ARP requests after 2 quiet periods"):
        table.add_column(column, justify="right")
    table.add_row(str(arp["frames"]), f"{arp['sim_ns'] / 1e3:.0f}", str(arp["arp_requests"]),
                  ", ".join(f"{g / 1e3:.1f} us" for g in arp["arp_gaps_ns"]) or "none",
                  str(arp["arp_requests_after_quiet"]))
    console.print(table)


def report(board: Board, results: dict, console: Console) -> None:
    config = results["config"]
    clock = (f"{board.name}: engine at {config.clock_hz / 1e6:g} MHz, {config.slot_bytes // 1024} KiB slots"
             + (f" in DRAM, {PACKETS_IN_DRAM} packets a buffer" if config.dram else ""))
    table = Table(title=f"Transmit, unpaced, at the GMII wires (gigabit Ethernet); {clock}")
    for column in ("payload B", "carriage", "frames timed", "wire B/frame", "median gap ns",
                   "goodput Mb/s", "theoretical Mb/s", "of theoretical"):
        table.add_column(column, justify="right")
    for row in results["transmit"]:
        table.add_row(str(row["payload"]), "UDP" if row["udp"] else "IP 30", str(row["frames"]),
                      str(row["wire_bytes"]), f"{row['median_interval_ns']:.0f}", f"{row['goodput_mbps']:.1f}",
                      f"{row['theoretical_mbps']:.1f}", f"{row['goodput_mbps'] / row['theoretical_mbps']:.2%}")
    console.print(table)
    table = Table(title=f"Receive: DATA frames back to back at the minimum gap; {clock}")
    for column in ("payload B", "carriage", "gap B", "frames", "accepted", "drops"):
        table.add_column(column, justify="right")
    for row in results["receive"]:
        drops = ", ".join(f"{k}={v}" for k, v in row["drops"].items()) or "0"
        table.add_row(str(row["payload"]), "UDP" if row["udp"] else "IP 30", str(row["gap_bytes"]),
                      str(row["frames"]), str(row["accepted"]), drops)
    console.print(table)
    if "link" not in results:  # not measured with the slots in DRAM
        return
    table = Table(title=f"Host link (requests pipelined, up to {F.WINDOW} in flight); {clock}")
    for column in ("case", "bytes", "goodput Mb/s", "theoretical Mb/s", "of theoretical", "DATA meanwhile Mb/s",
                   "latency"):
        table.add_column(column, justify="right")
    for row in results["link"]:
        if "latency_ns" in row:
            table.add_row(row["case"], "", "", "", "", "", f"{row['latency_ns'] / 1e3:.2f} us "
                          f"({row['latency_cycles']} cycles)")
            continue
        table.add_row(row["case"], str(row["bytes"]), f"{row['goodput_mbps']:.1f}", f"{row['theoretical_mbps']:.1f}",
                      f"{row['goodput_mbps'] / row['theoretical_mbps']:.2%}",
                      f"{row['data_mbps']:.1f}" if "data_mbps" in row else "", "")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=frame_cases, default=CASES, help="payload:ip|udp, comma-separated")
    parser.add_argument("--no-boards", action="store_true", help="skip the bitstream builds")
    parser.add_argument("--slots", choices=("block", "dram"), default="block",
                        help="each board's slots in block RAM (default) or in its DRAM, on LiteDRAM's model of "
                             "its chip (no host link table, no bitstreams)")
    parser.add_argument("--clock-mhz", type=positive, metavar="MHZ",
                        help="run each board's engine (and LiteEth's side of it) at this clock instead of its own: "
                             "how fast it must be for 64-byte frames back to back (bitstreams in build/<board>_<N>mhz)")
    args = parser.parse_args(argv)
    if args.slots == "dram" and args.clock_mhz:
        parser.error("--clock-mhz is for the block-RAM designs: a DRAM design runs at its board's DRAM build's clock")
    boards = list(BOARDS.values())
    if args.clock_mhz:
        boards = [replace(b, config=replace(b.config, clock_hz=args.clock_mhz * 1_000_000)) for b in boards]
    console = Console()
    if not console.is_terminal:
        console.width = 160
    for board in boards:
        with tempfile.TemporaryDirectory() as tmp:
            report(board, simulate(board, Path(tmp) / "bench.json", args.cases, args.slots), console)
    if args.slots == "dram":
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        report_arp(simulate_arp(Path(tmp) / "bench.json"), console)
    if not args.no_boards:
        for board in boards:
            placed, seed = build.build(board, MAC_ADDRESS, IP_ADDRESS,
                                       build.LINK_PORT, build.ROOT / "build" / f"{board.name}{clocked(board)}")
            console.print(build.summary(board, placed, seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
