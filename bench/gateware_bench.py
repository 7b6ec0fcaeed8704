"""The gateware benchmark: cycles per packet against the wire, pacing, utilisation.

    python -m netblt.bench.gateware_bench          (make bench-gateware)

Runs bench/gateware_bench_tb.py under Verilator on the transmit and receive sides in
the default configuration, each with its store in block RAM and in each board's DRAM
(LiteDRAM's model PHY), then synthesises the engine with Yosys ``synth_ecp5`` and
places and routes it out of context with nextpnr-ecp5 for its Fmax (``--no-synthesis``
leaves those two out).
Prints tables; docs/benchmarks.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from amaranth.back import verilog
from rich.console import Console
from rich.table import Table

from ..formats.rfc998 import DATA_HEADER_SIZE, aligned
from ..gateware.config import EngineConfig
from ..gateware.engine import Engine
from ..gateware.receive_path import Receiver
from ..gateware.transmit_path import Transmitter
from ..host.units import positive
from ..hw import litedram_core
from ..hw.boards import BOARDS
from ..hw.build import tools_environment
from ..hw.nextpnr import NextpnrReport, read_report
from ..sim.rtl import hdl
from ..sim.rtl.dram_tops import dram_receiver, dram_transmitter
from .wire import wire_cycles

MODULE = "netblt.bench.gateware_bench_tb"
PART = ["--25k", "--package", "CABGA256", "--speed", "6"]
"""The Colorlight 5A-75B's LFE5U-25F, the slowest speed grade the engine must meet."""


STORES = ("block RAM", "DRAM, Versa (model)", "DRAM, Colorlight (model)")
CHIPS = {"DRAM, Versa (model)": "versa", "DRAM, Colorlight (model)": "colorlight"}


def store_config(store: str) -> EngineConfig:
    """The engine a store is measured in: at the clock of the board whose DRAM it is in
    (the Colorlight's DRAM build runs its engine at 45 MHz), else the default's."""
    if store not in CHIPS:
        return EngineConfig()
    board = next(board for board in BOARDS.values() if board.chip == CHIPS[store])
    return EngineConfig(clock_hz=board.built("dram").config.clock_hz)


def simulate(results: Path, sizes: str, bursts: int) -> dict:
    """Each side with its store in block RAM and in each board's DRAM (LiteDRAM's model
    PHY with the chip's timings; sizes a line takes), pacing included."""
    env = {"NETBLT_BENCH_RESULTS": str(results), "NETBLT_BENCH_SIZES": sizes,
           "NETBLT_BENCH_BURSTS": str(bursts)}
    here = Path(__file__).parent
    out: dict = {}
    for store in STORES:
        config = store_config(store)
        out[store] = {"clock_hz": config.clock_hz}
        if store in CHIPS:
            chip = CHIPS[store]
            chip_name = chip + hdl.clock_suffix(config.clock_hz, EngineConfig().clock_hz)  # not over the tests' builds
            core = hdl.BUILD / "litedram" / f"{chip}_model.v"
            description = litedram_core.generate(chip, core)
            out[store]["description"] = description
            sides = [(dram_transmitter(config, description), f"transmitter_{chip_name}",
                      "bench_transmit_rate,bench_pacing,bench_send_while_uploading", [core]),
                     (dram_receiver(config, description), f"receiver_{chip_name}", "bench_receive,bench_download",
                      [core])]
            store_env = {**env, "NETBLT_TB_DRAM_DESCRIPTION": json.dumps(description),
                         "NETBLT_TB_CLOCK_HZ": str(config.clock_hz)}
        else:
            sides = [(Transmitter(config), "transmitter", "bench_transmit_rate,bench_pacing,bench_send_while_uploading",
                      []),
                     (Receiver(config), "receiver", "bench_receive,bench_download", [])]
            store_env = env
        for top, name, cases, sources in sides:
            inner = getattr(top, "inner", top)
            longest = inner.store.packet_words * config.beat_bytes
            runner = hdl.build(top, name, sources)
            results.unlink(missing_ok=True)
            hdl.run(runner, name, MODULE, here, testcase=cases, env={
                **store_env, "NETBLT_BENCH_SIZES": ",".join(s for s in sizes.split(",") if int(s) <= longest)})
            out[store].update(json.loads(results.read_text()))
    return out


def synthesise() -> tuple[dict[str, int], NextpnrReport]:
    """The default engine through Yosys synth_ecp5 (cell counts), then nextpnr out of
    context on the Colorlight's part (Fmax at the default clock)."""
    config = EngineConfig()
    directory = hdl.BUILD / "synth"
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "engine.v"
    source.write_text(verilog.convert(Engine(config), name="engine", emit_src=False))
    env = {**os.environ, **tools_environment()}
    subprocess.run([env["YOSYS"], "-q", "-p", f"read_verilog {source}; "
                    "synth_ecp5 -top engine -json engine.json; tee -o stat.txt stat"],
                   cwd=directory, env=env, check=True, capture_output=True, text=True)
    stat = (directory / "stat.txt").read_text()
    cells = {name: int(count) for count, name in re.findall(r"^\s+(\d+)\s+(\S+)\s*$", stat, re.M)}
    if "LUT4" not in cells:
        raise RuntimeError(f"no LUT4 count in Yosys statistics; see {directory / 'stat.txt'}")
    luts = cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0)
    flops = sum(v for k, v in cells.items() if k.startswith("TRELLIS_FF"))
    utilisation = {"LUT4 (CCU2C counted as 2)": luts, "flip-flops": flops,
                   "EBR (DP16KD)": cells.get("DP16KD", 0),
                   "distributed RAM (TRELLIS_DPR16X4)": cells.get("TRELLIS_DPR16X4", 0),
                   "DSP (MULT18X18D)": cells.get("MULT18X18D", 0)}
    subprocess.run([env["NEXTPNR_ECP5"], *PART, "--json", "engine.json",
                    "--out-of-context", "--freq", f"{config.clock_hz / 1e6:g}", "--timing-allow-fail",
                    "--report", "report.json", "--log", "pnr.log", "--quiet"],
                   cwd=directory, env=env, check=True, capture_output=True, text=True)
    return utilisation, read_report(directory / "report.json")


def report(results: dict, synthesis: tuple[dict[str, int], NextpnrReport] | None, console: Console) -> None:
    config = EngineConfig()
    for store in STORES:
        clock_hz = results[store]["clock_hz"]
        table = Table(title=f"Transmit, unpaced ({config.data_width}-bit at {clock_hz / 1e6:g} MHz), "
                            f"store in {store}")
        for column in ("payload B", "engine cycles/pkt", "with data checksums", "wire cycles/pkt",
                       "wire / engine", "engine Mb/s", "wire goodput Mb/s"):
            table.add_column(column, justify="right")
        for row in results[store]["transmit"]:
            size = row["payload"]
            wire = wire_cycles(DATA_HEADER_SIZE + aligned(size), clock_hz)
            engine = max(row["cycles"], row["cycles_checksum"])
            table.add_row(str(size), f"{row['cycles']:g}", f"{row['cycles_checksum']:g}", f"{wire:.1f}",
                          f"{wire / engine:.2f}", f"{size * 8 * clock_hz / engine / 1e6:.0f}",
                          f"{size * 8 * clock_hz / wire / 1e6:.0f}")
        console.print(table)

    for store in STORES:
        clock_hz = results[store]["clock_hz"]
        table = Table(title=f"Receive: DATA packets in a row, store in {store} (engine at {clock_hz / 1e6:g} MHz)")
        for column in ("payload B", "spacing", "packets", "accepted", "drops", "cycles/pkt", "wire cycles/pkt",
                       "Mb/s taken"):
            table.add_column(column, justify="right")
        for row in results[store]["receive"]:
            wire = wire_cycles(DATA_HEADER_SIZE + aligned(row["payload"]), clock_hz)
            table.add_row(str(row["payload"]), row["spacing"], str(row["packets"]), str(row["accepted"]),
                          str(row["drops"]), f"{row['cycles']:g}", f"{wire:.1f}",
                          f"{row['payload'] * 8 * clock_hz / row['cycles'] / 1e6:.0f}")
        console.print(table)
    table = Table(title="Download from the receive store (a whole slot from a seek)")
    for column in ("store", "while", "words", "cycles", "words/cycle", "Mb/s", "DATA accepted"):
        table.add_column(column, justify="right")
    for store in STORES:
        for row in results[store]["download"]:
            per_cycle = row["words"] / row["cycles"]
            table.add_row(store, row["while"], str(row["words"]), str(row["cycles"]), f"{per_cycle:.3f}",
                          f"{per_cycle * config.data_width * results[store]['clock_hz'] / 1e6:.0f}",
                          f"{row['accepted']} of {row['packets']}")
    console.print(table)

    console.print(whole_load(results))

    table = Table(title="Pacing")
    for column in ("store", "mode", "bursts", "packets", "burst x payload / interval (cycles)",
                   "worst burst start error (cycles)", "worst packet error (cycles)",
                   "rate error", "gaps between starts (cycles)"):
        table.add_column(column, justify="right")
    for store in STORES:
        for mode, row in results[store]["pacing"].items():
            spread = "-" if row["spread"] is None else f"{row['spread']:.2f}"
            table.add_row(store, mode, str(row["bursts"]), str(row["packets"]),
                          f"{row['burst_size']} x {row['payload']} B / {row['interval']}",
                          str(row["deviation"]), spread, f"{row['rate_error'] * 100:.4f}%",
                          f"{row['gaps'][0]}..{row['gaps'][1]}")
    console.print(table)

    if synthesis:
        utilisation, placed = synthesis
        table = Table(title="Engine alone, default configuration, Yosys synth_ecp5")
        table.add_column("resource")
        table.add_column("used", justify="right")
        for name, count in utilisation.items():
            table.add_row(name, str(count))
        console.print(table)
        table = Table(title="Engine alone, nextpnr-ecp5 out of context, LFE5U-25F speed 6")
        for column in ("clock", "Fmax MHz", "constraint MHz", "margin", "met"):
            table.add_column(column, justify="right")
        for clock in placed.clocks:
            table.add_row(clock.clock, f"{clock.achieved_mhz:.1f}", f"{clock.constraint_mhz:g}",
                          f"{clock.margin:+.0%}", "yes" if clock.met else "NO")
        console.print(table)


def whole_load(results: dict) -> Table:
    """Each board's store under both its loads at once, and what that costs its DRAM."""
    table = Table(title="A board's whole load on its store: a sender's DATA out and uploads in, a receiver's "
                        "DATA in and downloads out")
    for column in ("store", "load", "DATA Mb/s", "host link Mb/s", "DRAM read / write Mb/s",
                   "bursts / refreshes / rows opened", "DRAM time: data, refresh, row changes (at most)"):
        table.add_column(column, justify="right")
    width = EngineConfig().data_width
    for store in STORES:
        clock_hz = results[store]["clock_hz"]
        mbps = lambda words, cycles: words * width * clock_hz / cycles / 1e6  # noqa: E731
        sending = results[store]["send_while_uploading"]
        receiving = next(row for row in results[store]["download"] if row["packets"])
        rows = [("sending", f"{sending['payload'] * 8 * clock_hz / sending['gap'] / 1e6:.0f} out",
                 f"{mbps(sending['uploaded'], sending['cycles']):.0f} in", sending["dram"]),
                ("receiving", f"{receiving['accepted']} of {receiving['packets']} in at the wire's rate",
                 f"{mbps(receiving['words'], receiving['cycles']):.0f} out", receiving["dram"])]
        for load, data, link, dram in rows:
            table.add_row(f"{store}, engine at {clock_hz / 1e6:g} MHz", load, data, link,
                          *dram_figures(dram, results[store].get("description")))
    return table


def dram_figures(dram: dict | None, description: dict | None) -> tuple[str, str, str]:
    """Bandwidth by direction, command counts, and the share of the DRAM's time each
    kind of work took (a row change costs closing and opening: tRP + tRCD, the most it
    can take, as banks overlap them)."""
    if dram is None:
        return "-", "-", "-"
    seconds, per_command = dram["ns"] * 1e-9, description["data_bits"] // 8
    cycles = seconds * description["clock_hz"]
    read, write = (dram[kind] * per_command * 8 / seconds / 1e6 for kind in ("read", "write"))
    shares = ((dram["read"] + dram["write"]) * description["t_ccd"], dram["refresh"] * description["t_rfc"],
              dram["activate"] * (description["t_rp"] + description["t_rcd"]))
    return (f"{read:.0f} / {write:.0f}", f"{dram['read'] + dram['write']} / {dram['refresh']} / {dram['activate']}",
            ", ".join(f"{share / cycles:.0%}" for share in shares))


def payload_sizes(text: str) -> str:
    """``--sizes``: payload sizes in bytes, comma-separated, whole 32-bit words within a slot."""
    slot = EngineConfig().slot_bytes
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of byte counts: {text!r}") from None
    wrong = [n for n in sizes if n <= 0 or n % 4 or n > slot]
    if wrong:
        raise argparse.ArgumentTypeError(f"{wrong[0]} bytes: sizes are multiples of 4 from 4 to {slot}")
    return ",".join(map(str, sizes))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=payload_sizes, default="4,64,256,576,1024,1448,1472,8192",
                        help="payload sizes in bytes, comma-separated (multiples of 4 up to a slot)")
    parser.add_argument("--bursts", type=positive, default=1000, help="bursts to time in the pacing run")
    parser.add_argument("--no-synthesis", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = simulate(Path(tmp) / "bench.json", args.sizes, args.bursts)
    console = Console()
    if not console.is_terminal:  # a log or a pipe: keep the tables whole
        console.width = 160
    report(results, None if args.no_synthesis else synthesise(), console)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
