"""``netblt board status`` and ``watch``: what a board says about itself, over the host link.

A STATUS request needs no session, so neither takes the board from the host that
drives it: ``status`` shows the board, its address, who owns it, and every register that
reading does not change (docs/register-map.md says what each one means); ``watch`` asks
again and again and shows the counters with their rates, the board's ``top``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import time

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..driver.board import BoardDataPath
from ..driver.board_session import leave, take
from ..driver.board_find import FIND_MOST, find
from ..driver.link import BoardLink
from ..driver.link_client import LinkError
from ..driver.transport import TransportError, parse_address, show
from ..formats.dram_csr import DramPhy
from ..formats.host_link import LINK_PORT
from ..formats.registers import (BOARD_NAMES, DRAM_LEVELS_WORD, DROP_COUNTERS, ENGINE_STATE, GEOMETRY_WORD, GROUPS,
                                LINK_GROUPS)
from .units import parse_duration, parse_listen_address, parse_port

ADDRESSES = {"PEER_ADDRESS", "CONTROL_FROM", "LINK_OWNER_ADDRESS", "IP_ADDRESS", "NETMASK", "GATEWAY"}
"""Registers that hold an IPv4 address."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="board_command", required=True)
    status = sub.add_parser("status", help="show a board's identity, owner and registers",
                            description="Ask a board (or netblt sim-board) for a snapshot of its "
                                        "registers. Needs no session: the host driving it is not disturbed.")
    _asks(status, "how long to wait for an answer, with a unit: 500ms, 10s (default: 3s)")
    status.add_argument("--json", action="store_true", help="print the registers as one JSON object")
    watch = sub.add_parser("watch", help="show a board's counters and their rates, refreshed (its top)",
                           description="Ask a board (or netblt sim-board) for its registers again and again: "
                                       "the owner, the engine's state, and every counter with its rate since the "
                                       "last refresh, drops by reason. Needs no session. Ctrl-C ends it.")
    _asks(watch, "how long to wait for each answer (default: 3s)")
    watch.add_argument("--interval", type=_timeout, default=1.0, metavar="TIME",
                       help="time between refreshes, with a unit: 500ms, 2s (default: 1s)")
    watch.add_argument("--count", type=_count, default=0, metavar="N",
                       help="stop after N refreshes (default: until Ctrl-C)")
    watch.add_argument("--metrics", type=parse_listen_address, metavar="ADDR:PORT",
                       help="serve the board's counters, link and owner for Prometheus here (docs/monitoring.md)")
    find_ = sub.add_parser("find", help="find the boards on a segment",
                           description="Ask every address of a network (at most 4096) and its broadcast "
                                       "address for a board's STATUS, which needs no session, and list the "
                                       "boards that answer.")
    find_.add_argument("network", metavar="NETWORK", type=_network, help="addresses to ask, e.g. 192.168.1.0/24")
    find_.add_argument("--port", type=_link_port, default=LINK_PORT, help=f"the boards' host link port ({LINK_PORT})")
    find_.add_argument("--timeout", type=_timeout, default=1.0, metavar="TIME",
                       help="how long to wait for answers (default: 1s)")
    find_.add_argument("--json", action="store_true", help="each board's decoded status, one JSON line each")
    for name, text in (("release", "free a board that a host holds: take its session (from a host that died, "
                                   "once it has been silent for 5 s) and end it, so that the next host gets it "
                                   "at once"),
                       ("reset", "release a board and put its engine back as a host finds it: every receive "
                                 "slot released, its counters zeroed, its ports and peer cleared")):
        command = sub.add_parser(name, help=text.split(":")[0], description=text[0].upper() + text[1:] + ".",
                                 aliases=["take-over"] if name == "release" else [])
        command.add_argument("board", metavar="ADDR[:PORT]", help=f"the board's host link (port {LINK_PORT})")
    sub.metavar = "{" + ",".join(sub.choices) + "}"  # what a missing command's error names


def _asks(command: argparse.ArgumentParser, timeout_help: str) -> None:
    """A command that asks one board for its STATUS: the board, and how long to wait."""
    command.add_argument("board", metavar="ADDR[:PORT]", help=f"the board's host link (port {LINK_PORT})")
    command.add_argument("--timeout", type=_timeout, default=3.0, metavar="TIME", help=timeout_help)


def _timeout(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"timeout {text!r} must be longer than 0")
    return seconds


def _network(text: str) -> ipaddress.IPv4Network:
    try:
        network = ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 network (give ADDR/PREFIX)") from None
    if network.num_addresses > FIND_MOST:
        raise argparse.ArgumentTypeError(f"{text} has {network.num_addresses} addresses; ask at most {FIND_MOST} "
                                         f"(/{32 - FIND_MOST.bit_length() + 1} or longer)")
    return network


def _link_port(text: str) -> int:
    port = parse_port(text)
    if not port:
        raise argparse.ArgumentTypeError("port 0 names no board's host link")
    return port


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"count {text!r} must be a whole number, at least 1")
    return int(text)


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.board_command == "find":
        return find_boards(args, out, err)
    try:
        address = parse_address(args.board, LINK_PORT)
        if not address[0] or address[1] == 0:
            raise TransportError(f"{args.board!r} names no board: give ADDR[:PORT]")
        if args.board_command in ("release", "take-over", "reset"):
            return release(address, args.board_command == "reset", out, err)
        link = BoardLink(address, give_up=args.timeout)
    except (TransportError, OSError) as exc:
        err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
        return 2
    try:
        return (watch if args.board_command == "watch" else status)(link, args, out)
    except LinkError as exc:
        err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
        return 1
    finally:
        link.close()


def release(address: tuple[str, int], reset: bool, out: Console, err: Console) -> int:
    """Take the board's session as a host does (saying whose it was) and end it at once."""
    def say(text: str) -> None:
        err.print(f"netblt: {text}", highlight=False, soft_wrap=True)

    try:
        link = BoardLink(address)
        try:
            board = snapshot(link)
        finally:
            link.close()
        held = board["link"]["owner"] if board["registers"]["TAKEOVER_AFTER"] else None  # 0: that host left
        if reset:
            BoardDataPath.open(address, local_port=0, notice=say).close()
        else:
            leave(take(address, notice=say))
    except LinkError as exc:
        say(f"error: {exc}")
        return 1
    was = f"it was held by {held['address']}" if held else "no host held it"
    done = "reset (receive slots released, counters zeroed, ports and peer cleared) and free" if reset else "free"
    out.print(f"board {show(address)}: {done} for the next host ({was})", highlight=False, soft_wrap=True)
    return 0


def find_boards(args: argparse.Namespace, out: Console, err: Console) -> int:
    """One line (or JSON object) per board that answers, in address order; 1 if none did."""
    network = args.network
    addresses = [str(a) for a in (network if network.num_addresses <= 2 else network.hosts())]
    if network.num_addresses > 2:
        addresses.append(str(network.broadcast_address))  # a board that hears broadcasts answers once more
    found = find(addresses, args.port, args.timeout)
    for where in sorted(found, key=lambda source: ipaddress.IPv4Address(source[0])):
        shown, answer = show(where), found[where]
        if isinstance(answer, str):
            err.print(f"netblt: {shown}: {answer}", highlight=False, soft_wrap=True)
            continue
        board = decoded(shown, unchanged_by_reading(answer))
        out.print(json.dumps(board) if args.json else summary(board), highlight=False, soft_wrap=True)
    if not found:
        err.print(f"netblt: no board answered on {network} at port {args.port} within {args.timeout:g} s",
                  highlight=False, soft_wrap=True)
    return 0 if found else 1


def snapshot(link: BoardLink) -> dict:
    """The board's registers that reading does not change, decoded."""
    return decoded(link.shown, unchanged_by_reading(link.status()))


def unchanged_by_reading(registers: dict[str, int]) -> dict[str, int]:
    """Those of a STATUS snapshot that reading does not change (the rest read 0 there)."""
    readable = {r.name for _, group in GROUPS + LINK_GROUPS for r in group if r.access in ("r", "rw")}
    return {name: value for name, value in registers.items() if name in readable}


def status(link: BoardLink, args: argparse.Namespace, out: Console) -> int:
    board = snapshot(link)
    shown = board["registers"]
    if args.json:
        out.print(json.dumps(board), highlight=False, soft_wrap=True)
        return 0
    out.print(summary(board), highlight=False, soft_wrap=True)
    table = Table(title=f"Registers of {link.shown} (those that reading does not change)")
    for column in ("group", "register", "value", "meaning"):
        table.add_column(column)
    for title, group in GROUPS + LINK_GROUPS:
        for r in group:
            if r.name in shown:
                table.add_row(title.split(" (")[0], r.name, value_text(r.name, shown[r.name]), r.doc)
    out.print(table)
    return 0


def watch(link: BoardLink, args: argparse.Namespace, out: Console) -> int:
    """Refresh until ``--count`` refreshes or Ctrl-C; on a terminal in place, else one
    table after another; with ``--metrics``, each snapshot for Prometheus too."""
    last = None
    metrics, server = None, None
    if args.metrics:
        from .metrics import Metrics  # prometheus_client only where asked for
        metrics = Metrics()
        try:
            server = metrics.serve(args.metrics)
        except OSError as exc:
            raise LinkError(f"cannot serve metrics on {show(args.metrics)}: {exc.strerror}") from None
    try:
        with Live(console=out, auto_refresh=False, transient=False) if out.is_terminal else _Printed(out) as live:
            for refresh in range(args.count or 1 << 62):
                if refresh:
                    time.sleep(args.interval)
                now, board = time.monotonic(), snapshot(link)
                if metrics:
                    metrics.publish_board(board)
                live.update(Group(Text(summary(board)), counters_table(board, last, now)), refresh=True)
                last = (now, board)
    except KeyboardInterrupt:
        pass
    finally:
        if server:
            server.shutdown()
    return 0


class _Printed:
    """Live's calls, for output that is not a terminal: each refresh printed after the last."""

    def __init__(self, out: Console) -> None:
        self.out = out

    def __enter__(self) -> _Printed:
        return self

    def __exit__(self, *_) -> None:
        pass

    def update(self, renderable, refresh: bool = False) -> None:
        self.out.print(renderable, highlight=False, soft_wrap=True)


def counters_table(board: dict, last: tuple[float, dict] | None, now: float) -> Table:
    """Every counter with its rate since ``last`` (host seconds; a counter wraps at 32 bits)."""
    table = Table(title=f"Counters of {board['board']}, engine {'idle' if board['engine']['state']['tx_idle'] else 'sending'}")
    for column, justify in (("counter", "left"), ("value", "right"), ("per second", "right")):
        table.add_column(column, justify=justify)
    for name, value in board["counters"].items():
        if name in DROP_COUNTERS and not value:
            continue  # drops by reason: only those that happened
        rate = ""
        if last is not None:
            rate = f"{((value - last[1]['counters'][name]) & 0xFFFF_FFFF) / max(1e-9, now - last[0]):,.0f}"
        table.add_row(name, f"{value:,}", rate)
    return table


def value_text(name: str, value: int) -> str:
    if name in ADDRESSES:
        return str(ipaddress.IPv4Address(value))
    return f"{value} (0x{value:x})" if value > 9 else str(value)


def decoded(where: str, r: dict[str, int]) -> dict:
    """The snapshot as a reader wants it: addresses as text, words as their fields, the
    owner, the link, the slots and the counters by name; the raw registers beside them."""
    g = GEOMETRY_WORD.unpack(r["GEOMETRY"])
    owner = {"address": f"{ipaddress.IPv4Address(r['LINK_OWNER_ADDRESS'])}:{r['LINK_OWNER_PORT']}",
             "silent_seconds": r["LINK_OWNER_SILENT"] / 1000,  # by the board's clock
             "left": not r["TAKEOVER_AFTER"]} if r["LINK_SESSION"] else None  # a host that ends sets 0
    return {
        "board": where, "name": BOARD_NAMES.get(r["BOARD"], f"board {r['BOARD']}"),
        "address": str(ipaddress.IPv4Address(r["IP_ADDRESS"])),
        "mac": ":".join(f"{b:02x}" for b in ((r["MAC_HIGH"] << 32) | r["MAC_LOW"]).to_bytes(6, "big")),
        "netmask": str(ipaddress.IPv4Address(r["NETMASK"])),
        "gateway": str(ipaddress.IPv4Address(r["GATEWAY"])) if r["GATEWAY"] else None,
        "link": {"up": bool(r["LINK_UP"]), "session": r["LINK_SESSION"], "owner": owner, "window": r["LINK_WINDOW"]},
        "engine": {"clock_hz": r["CLOCK_HZ"], "state": {k: bool(v) for k, v in ENGINE_STATE.unpack(r["STATE"]).items()}},
        "slots": {"transmit": g["tx_slots"], "receive": g["rx_slots"], "bytes": r["SLOT_BYTES"],
                  "bitmap_packets": 1 << g["log2_max_packets"], "pattern_source": bool(g["fill"]),
                  "pattern_checker": bool(g["check"]), "source_port": bool(g["take"]),
                  "sink_port": bool(g["sink"]), "text": slots(r)},
        "counters": {reg.name: r[reg.name] for title, group in GROUPS + LINK_GROUPS if "counters" in title.lower()
                     for reg in group if reg.name in r and reg.access == "r"},
        "registers": r,
    }


def summary(board: dict) -> str:
    """The decoded snapshot in one line."""
    owner = board["link"]["owner"]
    if owner is None:
        held = "no session"
    elif owner["left"]:
        held = f"free: its last host, {owner['address']}, ended its session"
    else:
        held = f"owned by {owner['address']}, silent {owner['silent_seconds']:g} s by the board's clock"
    return (f"{board['board']}: {board['name']}, {board['address']} ({board['mac']}), "
            f"netmask {board['netmask']}, gateway {board['gateway'] or 'none'}, "
            f"link {'up' if board['link']['up'] else 'down'}, engine at {board['engine']['clock_hz'] / 1e6:g} MHz "
            f"with {board['slots']['text']}; {held}")


def slots(r: dict[str, int]) -> str:
    """The slots GEOMETRY and SLOT_BYTES describe, whether STATE says their memory is
    ready (a board's DRAM is not until its init sequence has run, and its reads are
    levelled where they need it), and the levels DRAM_LEVELS holds."""
    g = GEOMETRY_WORD.unpack(r["GEOMETRY"])
    size = r["SLOT_BYTES"]
    size_text = f"{size >> 20} MiB" if size >= 1 << 20 and size % (1 << 20) == 0 else f"{size // 1024} KiB"
    text = (f"{g['tx_slots']} transmit and {g['rx_slots']} receive slots of {size_text} "
            f"({1 << g['log2_max_packets']}-packet bitmaps)")
    ports = ["a pattern source"] * g["fill"] + ["a source port"] * g["take"] + \
        ["a sink port" + " with the pattern checker" * g["check"]] * g["sink"]
    if ports:
        text += ", " + (", ".join(ports[:-1]) + " and " if len(ports) > 1 else "") + ports[-1]
    phy = DramPhy.read(r["DRAM_PHY"])
    ready = ENGINE_STATE.unpack(r["STATE"])["slots_ready"]
    if not ready and phy.levelling:
        text += ", in DRAM whose reads are not levelled yet (a host levels them when it opens the board)"
    elif not ready:
        text += ", their memory not ready yet (DRAM still starting)"
    elif phy.levelling:
        levels = DRAM_LEVELS_WORD.unpack(r["DRAM_LEVELS"])
        text += ", in DRAM with its reads levelled (" + ", ".join(
            f"byte {m}: bitslip {levels[f'bitslip{m}']}, delay {levels[f'delay{m}']}" for m in range(phy.modules)) + ")"
    return text
