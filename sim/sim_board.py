"""``netblt sim-board``: a board that real programs reach over loopback, in simulation.

The board's whole design (hw/node.py: engine, host link, LiteEth) runs under Verilator
with its Ethernet port bridged to UDP sockets on 127.0.0.1 (sim/sim_board_tb.py), so
``netblt board status``, the host-link driver and NETBLT peers talk to it exactly as to
a board on a cable, only much slower: simulated time is what the board's timers see.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from netblt.driver.transport import Transport, TransportError
from netblt.host.units import parse_duration, parse_port, parse_probability

if TYPE_CHECKING:
    from netblt.gateware.config import EngineConfig
    from netblt.hw.boards import Board
    from netblt.hw.node import NetbltNode

MODULE = "netblt.sim.sim_board_tb"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--board", metavar="NAME", help="simulate this board's design (its slot sizes and "
                        "clock), as make bitstream names it; default: the design the tests simulate")
    parser.add_argument("--slots", choices=("block", "dram"), default="block",
                        help="where the board's buffer slots live: block RAM (default), or its DRAM, "
                             "on LiteDRAM's model of the board's chip, with the DRAM geometry (needs --board)")
    parser.add_argument("--link-port", type=parse_port, default=0, metavar="PORT",
                        help="the host link's port on 127.0.0.1 (default: any free one, printed)")
    parser.add_argument("--netblt-port", type=parse_port, default=0, metavar="PORT",
                        help="the board's NETBLT UDP port, on 127.0.0.1 too (default: any free one, printed)")
    parser.add_argument("--mtu", type=int, default=1500, choices=(1500, 9000),
                        help="the largest IP datagram the simulated wire carries (default: 1500)")
    parser.add_argument("--pcap", type=Path, metavar="FILE", help="write every frame on the board's wire here")
    parser.add_argument("--pace", type=_pace, default=0, metavar="N",
                        help="run exactly N times slower than real time, waiting whenever the simulation is "
                             "ahead: one steady scale between the board's time and its host's, whose timers "
                             "and rate choice then see a board whose speed does not change with its load "
                             "(default: 0, as fast as it can, which is slower with traffic than idle)")
    parser.add_argument("--transport", choices=("udp", "ip"), default="udp",
                        help="ip: carry NETBLT natively on IP protocol 30 to and from the board's NETBLT port "
                             "as well as in UDP (needs root or CAP_NET_RAW)")
    wan = parser.add_argument_group("a WAN between the board's NETBLT port and its peers, each way, in the "
                                    "simulation's time (the host link is local: not delayed, nothing lost)")
    wan.add_argument("--wan-delay", type=parse_duration, default=0.0, metavar="TIME",
                     help="one-way delay, with a unit: 20ms, 0.3s (default: 0); the simulation runs some "
                          "thousand times slower than real time, so a real-time peer sees that much more")
    wan.add_argument("--wan-loss", type=parse_probability, default=0.0, metavar="P",
                     help="random loss each way, e.g. 0.01 or 1%% (default: 0)")
    wan.add_argument("--wan-seed", type=int, default=1, metavar="N",
                     help="random seed: the same seed loses the same datagrams (default: 1)")


def _pace(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of times slower (0: as fast as it can)")
    return value


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
    from netblt.gateware.config import EngineConfig
    from netblt.hw import litedram_core
    from netblt.hw.boards import BOARDS
    from netblt.hw.node import NetbltNode
    from netblt.sim.dram_tops import in_dram

    from . import hdl

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
    from netblt.hw import liteeth_core

    from . import hdl

    return liteeth_core.simulation_core(hdl.BUILD / "liteeth", config.clock_hz)


def run_from_args(args: argparse.Namespace) -> int:
    for port in {args.link_port, args.netblt_port} - {0}:  # taken now: say so before minutes of building
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError as exc:
                print(f"netblt sim-board: error: cannot listen on 127.0.0.1:{port}: {exc.strerror}", file=sys.stderr)
                return 1
    if args.transport == "ip":
        try:
            Transport("ip", ("127.0.0.1", 0)).close()  # say so before minutes of building
        except TransportError as exc:
            print(f"netblt sim-board: error: {exc}", file=sys.stderr)
            return 1
    if args.pcap is not None and not args.pcap.parent.is_dir():
        print(f"netblt sim-board: error: no directory {str(args.pcap.parent)!r} for the pcap", file=sys.stderr)
        return 2
    if args.slots == "dram" and args.board is None:
        print("netblt sim-board: error: --slots dram needs --board: the slots go in that board's DRAM",
              file=sys.stderr)
        return 2
    # Amaranth, LiteX and Verilator's runner load only for this command.
    from netblt.hw.boards import BOARDS

    from . import hdl

    if args.board is not None and args.board not in BOARDS:
        print(f"netblt sim-board: error: no board {args.board!r}; there are {', '.join(sorted(BOARDS))}",
              file=sys.stderr)
        return 2
    chosen = design(BOARDS[args.board] if args.board else None, args.slots)
    config = chosen.config
    log = hdl.BUILD / f"{chosen.name}-build.log"
    print(f"netblt sim-board: building the {args.board or 'simulation'} design with Verilator (minutes the "
          f"first time; log in {log})", file=sys.stderr, flush=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        runner = hdl.build(chosen.node, chosen.name, chosen.sources, log)
    except RuntimeError:
        print(f"netblt sim-board: error: the Verilator build failed; see {log}", file=sys.stderr)
        return 1
    settings = {"link_port": args.link_port, "netblt_port": args.netblt_port, "mtu": args.mtu,
                "transport": args.transport, "wan_delay": args.wan_delay, "wan_loss": args.wan_loss,
                "wan_seed": args.wan_seed, "pace": args.pace,
                "pcap": str(args.pcap.resolve()) if args.pcap else "", "clock_hz": config.clock_hz,
                "parent": os.getpid()}
    env = {"NETBLT_SIM_BOARD": json.dumps(settings), "NETBLT_TB_CLOCK_HZ": str(config.clock_hz),
           "NETBLT_TB_SLOT_BYTES": str(config.slot_bytes), "COCOTB_LOG_LEVEL": "WARNING", "GPI_LOG_LEVEL": "WARNING",
           "PYTHONWARNINGS": "ignore", "NETBLT_TB_DRAM_DESCRIPTION": json.dumps(chosen.dram)}
    # SIGINT or SIGTERM here asks the simulation (through a file it watches) to stop and
    # print its summary; this process waits for it.
    with tempfile.TemporaryDirectory() as directory:
        stop = Path(directory) / "stop"
        env["NETBLT_SIM_BOARD_STOP"] = str(stop)
        previous = {number: signal.signal(number, lambda *_: stop.touch()) for number in (signal.SIGINT,
                                                                                           signal.SIGTERM)}
        try:
            hdl.run(runner, chosen.name, MODULE, Path(__file__).parent, testcase="serve", env=env)
        except RuntimeError:
            return 1  # the simulation said why
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
    return 0
