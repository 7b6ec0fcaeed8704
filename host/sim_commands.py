"""``netblt netem`` and ``netblt sim-board``: the commands that run sim/'s emulations.

The WAN relay (sim/wan) and the simulated board (sim/rtl) are the emulations; their
arguments, checks and one-line errors are here, with the other commands. sim-board's
gateware tools load only once its checks pass, so the rest of the CLI runs without them.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import os
import signal
import socket
import sys
import time
from typing import Any
from pathlib import Path

from ..formats.boards import BUILDS
from ..driver.transport import Transport, TransportError, parse_address, show
from ..sim.wan.netem import InFlight, Path as WanPath, PathConfig, describe
from ..sim.wan.relay import Relay
from ..sim.wan.tun_path import ADDRESSES, TunPath
from .units import parse_duration, parse_port, parse_probability, parse_rate, parse_size


def add_netem_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", metavar="ADDR:PORT", help="where the sender sends")
    parser.add_argument("--forward", metavar="ADDR:PORT", help="the receiver")
    parser.add_argument("--tun", metavar="NAME", help="instead of relaying UDP: create network namespaces "
                        "NAME-a (10.77.0.1) and NAME-b (10.77.0.2) joined through the path, for any IP "
                        "traffic (TCP, NETBLT over UDP or IP protocol 30); needs root")
    g = parser.add_argument_group("the path, applied in each direction")
    g.add_argument("--delay", type=parse_duration, default=0.0, metavar="TIME",
                   help="one-way delay, with a unit: 20ms, 0.3s (default: 0)")
    g.add_argument("--jitter", type=parse_duration, default=0.0, metavar="TIME",
                   help="extra random delay up to this, with a unit; enough of it reorders (default: 0)")
    g.add_argument("--loss", type=parse_probability, default=0.0, metavar="P",
                   help="random loss, e.g. 0.05 or 5%% (default: 0)")
    g.add_argument("--burst-loss", type=parse_probability, default=0.0, metavar="P",
                   help="chance per datagram that a loss burst starts (default: 0)")
    g.add_argument("--burst-length", type=float, default=4.0, metavar="N",
                   help="mean datagrams lost per burst (default: 4)")
    g.add_argument("--reorder", type=parse_probability, default=0.0, metavar="P",
                   help="chance a datagram is held back 2 ms (default: 0)")
    g.add_argument("--duplicate", type=parse_probability, default=0.0, metavar="P",
                   help="chance a datagram arrives twice (default: 0)")
    g.add_argument("--corrupt", type=parse_probability, default=0.0, metavar="P",
                   help="chance one bit of a datagram is flipped (default: 0)")
    g.add_argument("--rate", type=parse_rate, default=0.0, metavar="RATE",
                   help="bottleneck in bits/s, e.g. 100M (default: none)")
    g.add_argument("--queue", type=parse_size, default=1 << 20, metavar="BYTES",
                   help="bottleneck queue, e.g. 1M (default: 1M)")
    parser.add_argument("--seed", type=int, default=1, help="random seed: the same seed replays the "
                        "same losses (default: 1)")
    parser.add_argument("--duration", type=parse_duration, default=0.0, metavar="TIME",
                        help="stop after this long, e.g. 300s (default: run until Ctrl-C)")


def run_netem(args: argparse.Namespace) -> int:
    config = PathConfig(delay=args.delay, jitter=args.jitter, loss=args.loss, burst_loss=args.burst_loss,
                        burst_length=args.burst_length, reorder=args.reorder, duplicate=args.duplicate,
                        corrupt=args.corrupt, rate_bps=args.rate, queue_bytes=args.queue)
    if args.tun:
        if args.listen or args.forward:
            print("netblt netem: error: --tun takes no --listen or --forward", file=sys.stderr)
            return 2
        return _run_tun(args, config)
    if not (args.listen and args.forward):
        print("netblt netem: error: give --listen and --forward (or --tun NAME)", file=sys.stderr)
        return 2
    try:
        listen, forward = parse_address(args.listen), parse_address(args.forward)
    except TransportError as exc:
        print(f"netblt netem: error: {exc}", file=sys.stderr)
        return 2
    try:
        relay = Relay(listen, forward, config, seed=args.seed)
    except TransportError as exc:
        print(f"netblt netem: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"netblt netem: error: cannot listen on {args.listen}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"netblt netem: {show(relay.address)} -> {show(forward)}: {describe(config)}", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # ends the run as Ctrl-C does: no lock taken
    _on_time()
    try:
        relay.run(args.duration)
    except KeyboardInterrupt:
        pass
    _print_counts(relay.stats.forward, relay.stats.backward)
    _print_stalls(relay.in_flight)
    return 0


def _run_tun(args: argparse.Namespace, config: PathConfig) -> int:
    tun = TunPath(config, config, name=args.tun, seed=args.seed)
    try:
        tun.__enter__()
    except OSError as exc:
        print(f"netblt netem: error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    _on_time()
    (a, b), end = tun.names, time.monotonic() + args.duration if args.duration else float("inf")
    print(f"netblt netem: namespace {a} ({ADDRESSES[0]}) <-> {b} ({ADDRESSES[1]}): {describe(config)}; "
          f"run programs there with: ip netns exec {a} COMMAND", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        tun.run(end)
    except KeyboardInterrupt:
        pass
    finally:
        tun.close()
    _print_counts(*tun.paths)
    _print_stalls(tun.in_flight)
    return 0


def _on_time() -> None:
    """Real-time scheduling for the relay, where this process may have it (root, or
    CAP_SYS_NICE): a relay the host's other work holds up stalls the paths it emulates
    (counted, and printed at exit), as Linux's netem in the kernel is not held up."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        pass  # not permitted: it runs as any process does


def _print_counts(forward: WanPath, backward: WanPath) -> None:
    for name, path in (("forward", forward), ("backward", backward)):
        counted = ", ".join(f"{k} {v}" for k, v in sorted(path.counts.items()))
        print(f"{name}: {counted or 'nothing relayed'}", flush=True)


def _print_stalls(in_flight: InFlight[Any]) -> None:
    """A relay its host kept from running on time emulated slower paths than asked for."""
    if in_flight.stalls:
        print(f"stalled: {in_flight.stalls} times, {in_flight.stalled:.3f} s in all (this host was too busy to "
              "relay on time: the paths stood still meanwhile)", flush=True)


def add_sim_board_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="store_true",
                        help="run the board's functional model at host speed instead of its design under "
                             "Verilator: the same host link, registers and data path, no HDL tools needed")
    parser.add_argument("--link-delay", type=parse_duration, default=0.0, metavar="TIME",
                        help="with --model: one-way delay between the host and the board, e.g. 100us, as a "
                             "cable and a switch add (default: 0)")
    parser.add_argument("--board", metavar="NAME", help="simulate this board's design (its slot sizes and "
                        "clock), as make bitstream names it; default: the design the tests simulate")
    parser.add_argument("--slots", choices=("block", "dram"), default="block",
                        help="where the board's buffer slots live: block RAM (default), or its DRAM, "
                             "on LiteDRAM's model of the board's chip, with the DRAM geometry (needs --board)")
    parser.add_argument("--link-address", type=_address, default="127.0.0.1", metavar="ADDR",
                        help="with --model: the host link's IPv4 address, one of this host's, e.g. in a network "
                             "namespace where boards are looked for (default: 127.0.0.1)")
    parser.add_argument("--link-port", type=parse_port, default=0, metavar="PORT",
                        help="the host link's port (default: any free one, printed)")
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
                     help="one-way delay, with a unit: 20ms, 0.3s (default: 0); the simulation runs about "
                          "80 to 160 times slower than real time, so a real-time peer sees that much more")
    wan.add_argument("--wan-loss", type=parse_probability, default=0.0, metavar="P",
                     help="random loss each way, e.g. 0.01 or 1%% (default: 0)")
    wan.add_argument("--wan-seed", type=int, default=1, metavar="N",
                     help="random seed: the same seed loses the same datagrams (default: 1)")


def _address(text: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 address") from None


def _pace(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of times slower (0: as fast as it can)")
    return value


SIM_BOARD_NEEDS = ("amaranth", "litex", "liteeth", "litedram", "amaranth_boards", "cocotb", "verilator")
"""What sim-board builds and runs the design with: the hw and test extras' packages."""


def run_sim_board(args: argparse.Namespace) -> int:
    if error := _model_options(args):
        print(f"netblt sim-board: error: {error}", file=sys.stderr)
        return 2
    if args.model:
        return _run_model(args)
    if missing := [name for name in SIM_BOARD_NEEDS if importlib.util.find_spec(name) is None]:
        print(f"netblt sim-board: error: it needs {', '.join(missing)}: install netblt with its hw and test "
              "extras (make does)", file=sys.stderr)
        return 1
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
    from ..sim.rtl.sim_board import serve  # Amaranth, LiteX and Verilator's runner: only for this command

    return serve(args.board, args.slots, _settings(args))


def _settings(args: argparse.Namespace) -> dict:
    return {"link_address": args.link_address, "link_port": args.link_port, "netblt_port": args.netblt_port, "mtu": args.mtu,
            "transport": args.transport, "wan_delay": args.wan_delay, "wan_loss": args.wan_loss,
            "wan_seed": args.wan_seed, "pace": args.pace, "link_delay": args.link_delay,
            "pcap": str(args.pcap.resolve()) if args.pcap else ""}


def _model_options(args: argparse.Namespace) -> str | None:
    """What the chosen simulation cannot do, if anything asked for it."""
    if args.board is not None and args.board not in BUILDS:
        return f"no board {args.board!r}; there are {', '.join(sorted(BUILDS))}"
    if args.slots == "dram" and args.board is None:
        return "--slots dram needs --board: the slots go in that board's DRAM"
    if args.model and args.transport == "ip":
        return "the model carries NETBLT in UDP only; --transport ip needs the design under Verilator"
    if args.model and args.pace:
        return "the model runs in real time; --pace is for the design under Verilator"
    if args.link_delay and not args.model:
        return "--link-delay needs --model: the design under Verilator has no host-link delay"
    if args.link_address != "127.0.0.1" and not args.model:
        return "--link-address needs --model: the design under Verilator listens on 127.0.0.1"
    if args.pcap is not None and not args.pcap.parent.is_dir():
        return f"no directory {str(args.pcap.parent)!r} for the pcap"
    return None


def _run_model(args: argparse.Namespace) -> int:
    from ..sim.model.serve import serve

    return serve(args.board, args.slots, _settings(args))
