"""``netblt board status``: what a board says about itself, over the host link.

A STATUS request needs no session, so this never takes the board from the host that
drives it: it shows the board, its address, who owns it, and every register that
reading does not change (docs/register-map.md says what each one means).
"""

from __future__ import annotations

import argparse
import ipaddress
import json

from rich.console import Console
from rich.table import Table

from ..driver.link import BoardLink, LinkError
from ..driver.transport import TransportError, parse_address
from ..formats.dram_csr import DramPhy
from ..formats.host_link import LINK_PORT
from ..formats.registers import BOARD_NAMES, DRAM_LEVELS_WORD, ENGINE_STATE, GEOMETRY_WORD, GROUPS, LINK_GROUPS
from .units import parse_duration

ADDRESSES = {"PEER_ADDRESS", "CONTROL_FROM", "LINK_OWNER_ADDRESS", "IP_ADDRESS", "NETMASK", "GATEWAY"}
"""Registers that hold an IPv4 address."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="board_command", required=True)
    status = sub.add_parser("status", help="show a board's identity, owner and registers",
                            description="Ask a board (or netblt sim-board) for a snapshot of its "
                                        "registers. Needs no session: the host driving it is not disturbed.")
    status.add_argument("board", metavar="ADDR[:PORT]", help=f"the board's host link (port {LINK_PORT})")
    status.add_argument("--json", action="store_true", help="print the registers as one JSON object")
    status.add_argument("--timeout", type=_timeout, default=3.0, metavar="TIME",
                        help="how long to wait for an answer, with a unit: 500ms, 10s (default: 3s)")
    sub.metavar = "{" + ",".join(sub.choices) + "}"  # what a missing command's error names


def _timeout(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"timeout {text!r} must be longer than 0")
    return seconds


def run(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        address = parse_address(args.board, LINK_PORT)
        if not address[0] or address[1] == 0:
            raise TransportError(f"{args.board!r} names no board: give ADDR[:PORT]")
        link = BoardLink(address, give_up=args.timeout)
    except (TransportError, OSError) as exc:
        err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
        return 2
    try:
        registers = link.status()
    except LinkError as exc:
        err.print(f"netblt: error: {exc}", highlight=False, soft_wrap=True)
        return 1
    finally:
        link.close()
    readable = {r.name for _, group in GROUPS + LINK_GROUPS for r in group if r.access in ("r", "rw")}
    shown = {name: value for name, value in registers.items() if name in readable}
    board = decoded(link.shown, shown)
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


def value_text(name: str, value: int) -> str:
    if name in ADDRESSES:
        return str(ipaddress.IPv4Address(value))
    return f"{value} (0x{value:x})" if value > 9 else str(value)


def decoded(where: str, r: dict[str, int]) -> dict:
    """The snapshot as a reader wants it: addresses as text, words as their fields, the
    owner, the link, the slots and the counters by name; the raw registers beside them."""
    g = GEOMETRY_WORD.unpack(r["GEOMETRY"])
    owner = {"address": f"{ipaddress.IPv4Address(r['LINK_OWNER_ADDRESS'])}:{r['LINK_OWNER_PORT']}",
             "silent_seconds": r["LINK_OWNER_SILENT"] / 1000} if r["LINK_SESSION"] else None
    return {
        "board": where, "name": BOARD_NAMES.get(r["BOARD"], f"board {r['BOARD']}"),
        "address": str(ipaddress.IPv4Address(r["IP_ADDRESS"])),
        "mac": ":".join(f"{b:02x}" for b in ((r["MAC_HIGH"] << 32) | r["MAC_LOW"]).to_bytes(6, "big")),
        "netmask": str(ipaddress.IPv4Address(r["NETMASK"])),
        "gateway": str(ipaddress.IPv4Address(r["GATEWAY"])) if r["GATEWAY"] else None,
        "link": {"up": bool(r["LINK_UP"]), "session": r["LINK_SESSION"], "owner": owner, "window": r["LINK_WINDOW"]},
        "engine": {"clock_hz": r["CLOCK_HZ"], "state": {k: bool(v) for k, v in ENGINE_STATE.unpack(r["STATE"]).items()}},
        "slots": {"transmit": g["tx_slots"], "receive": g["rx_slots"], "bytes": r["SLOT_BYTES"],
                  "bitmap_packets": 1 << g["log2_max_packets"], "text": slots(r)},
        "counters": {reg.name: r[reg.name] for title, group in GROUPS + LINK_GROUPS if "counters" in title.lower()
                     for reg in group if reg.name in r and reg.access == "r"},
        "registers": r,
    }


def summary(board: dict) -> str:
    """The decoded snapshot in one line."""
    owner = board["link"]["owner"]
    held = f"owned by {owner['address']}, last heard {owner['silent_seconds']:g} s ago" if owner else "no session"
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
