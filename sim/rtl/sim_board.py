"""``netblt sim-board``: a board that real programs reach over loopback, in simulation.

The board's whole design (hw/node.py: engine, host link, LiteEth) runs under Verilator
in C++ (sim/rtl/harness.cpp), its Ethernet port bridged to UDP sockets on 127.0.0.1
(sim/rtl/bridge.py), so
``netblt board status``, the host-link driver and NETBLT peers talk to it exactly as to
a board on a cable, only much slower: simulated time is what the board's timers see.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ...gateware.config import EngineConfig
from ...hw import litedram_core, liteeth_core
from ...hw.boards import BOARDS, Board
from ...hw.node import NetbltNode
from . import bridge, hdl
from .bridge import BridgeError
from .dram_tops import in_dram
from .harness import Harness, HarnessError


@dataclass
class Design:
    """The node to simulate, its build's name (the tests and benchmarks share the builds),
    its configuration, the generated cores its Verilog instantiates, and with its slots
    in DRAM the model core's description (hw/litedram_core.py)."""

    node: NetbltNode
    name: str
    config: EngineConfig
    sources: list[Path]
    dram: dict | None = None


def design(board: Board | None, slots: str = "block") -> Design:
    """The node for ``board`` (None: the design the tests simulate) with its slots in
    block RAM or, for a board, in its DRAM; its cores are generated into build/ here. A
    board whose engine runs at another clock than its own (the Ethernet benchmark's
    ``--clock-mhz``) builds apart."""
    if board is None:
        config = EngineConfig(data_width=32)
        return Design(NetbltNode(config), "node", config, [_ethernet(config)])
    if slots == "block":
        config = board.config
        node = NetbltNode(config, board=board.number, intake_words=board.link_intake_words)
        name = f"node_{board.name}{hdl.clock_suffix(config.clock_hz, BOARDS[board.name].config.clock_hz)}"
        return Design(node, name, config, [_ethernet(config)])
    core = hdl.BUILD / "litedram" / f"{board.chip}_model.v"
    description = litedram_core.generate(board.chip, core)
    built = board.built("dram")
    config = in_dram(built.config, description)
    node = NetbltNode(config, board=board.number, intake_words=built.link_intake_words)
    return Design(node, f"node_{board.name}_dram", config, [_ethernet(config), core], description)


def _ethernet(config: EngineConfig) -> Path:
    """The LiteEth core the simulated node instantiates, generated for its clock."""
    return liteeth_core.simulation_core(hdl.BUILD / "liteeth", config.clock_hz)


def serve(board: str | None, slots: str, settings: dict) -> int:
    """Build ``board``'s design (None: the tests' design) with its slots in ``slots`` ("block"
    or "dram"), a minute or two the first time, and run it until SIGINT or SIGTERM, bridged
    to loopback as ``settings`` (sim/rtl/bridge.py's) say."""
    chosen = design(BOARDS[board] if board else None, slots)
    log = hdl.BUILD / f"{chosen.name}-harness.log"
    try:
        library = hdl.build_harness(chosen.node, chosen.name, chosen.sources, chosen.dram is not None, log,
                                    building=lambda: print(
            f"netblt sim-board: building the {board or 'simulation'} design with Verilator (a minute or two; "
            f"log in {log})", file=sys.stderr, flush=True))
    except RuntimeError:
        print(f"netblt sim-board: error: the Verilator build failed; see {log}", file=sys.stderr)
        return 1
    try:
        simulated = Harness(library, chosen.config.clock_hz, chosen.dram and chosen.dram["clock_hz"])
    except HarnessError as error:
        print(f"netblt sim-board: error: {error}", file=sys.stderr)
        return 1
    try:
        bridge.serve(simulated, settings | {"clock_hz": chosen.config.clock_hz})
    except BridgeError as error:
        print(f"netblt sim-board: error: {error}", file=sys.stderr)
        return 1
    finally:
        simulated.close()
    return 0
