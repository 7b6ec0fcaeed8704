"""The board designs' netlists as RTLIL, to tell whether a gateware change changed any.

    python -m netblt.hw.netlists OUT.il

Writes the RTLIL of the node the tests simulate and of each board's node, its slots in
block RAM and in DRAM (a geometry of 2**24 128-bit words, with a DRAM register port on
the Versa's), without Amaranth's source locations: two checkouts' files are equal
exactly when their netlists are. Amaranth orders the ports of the clock domains it
creates by Python's hash seed, so this runs with PYTHONHASHSEED=0 (it starts itself
again with it).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from pathlib import Path

from amaranth.back import rtlil

from ..formats.registers import DRAM_PHY_WORD
from ..gateware.config import DramGeometry, EngineConfig
from .boards import BOARDS
from .node import NetbltNode

VERSA_PHY = DRAM_PHY_WORD.pack(levelling=1, phases=2, words=4, rdphase=1, wrphase=0, modules=2, bitslips=4, delays=8)


def nodes() -> dict[str, NetbltNode]:
    """Every node the tests and bitstreams build, by name."""
    out = {"simulation": NetbltNode(EngineConfig(data_width=32))}
    for name, board in BOARDS.items():
        out[name] = NetbltNode(board.config, board=board.number, intake_words=board.link_intake_words)
        built = board.built("dram")
        dram = DramGeometry(24, 128, phy=VERSA_PHY if name == "versa_ecp5" else 0)
        out[f"{name}_dram"] = NetbltNode(dataclasses.replace(built.config, dram=dram), board=board.number,
                                         intake_words=built.link_intake_words)
    return out


def netlists() -> str:
    text = "\n".join(rtlil.convert(node, name=name) for name, node in nodes().items())
    return re.sub(r' *attribute \\src "[^"]*"\n', "", text)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m netblt.hw.netlists", description=__doc__.split("\n")[0])
    parser.add_argument("output", type=Path, help="the RTLIL file to write")
    args = parser.parse_args()
    if args.output.is_dir():
        parser.error(f"{args.output} is a directory; name the file to write")
    if not args.output.parent.is_dir():
        parser.error(f"no directory {str(args.output.parent)!r} for {args.output.name}")
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable, "-m", __spec__.name, *sys.argv[1:]],
                  os.environ | {"PYTHONHASHSEED": "0"})
    args.output.write_text(netlists())


if __name__ == "__main__":
    main()
