"""Programs a board's SRAM with its built bitstream through openFPGALoader.

    python -m netblt.hw.load --board colorlight_5a75b [--cable ft232]

Every way this can fail (no bitstream yet, no openFPGALoader, no board on the cable)
ends in one line that says what to do.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from .boards import BOARDS
from .build import NAME, ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", choices=sorted(BOARDS), required=True)
    parser.add_argument("--cable", help="openFPGALoader cable (default: the board's usual one)")
    args = parser.parse_args(argv)
    board = BOARDS[args.board]
    bitstream = ROOT / "build" / board.name / f"{NAME}.bit"
    cable = args.cable or board.cable
    if not bitstream.exists():
        return fail(f"no bitstream at {bitstream}: run `make bitstream BOARD={board.name}` first")
    tool = shutil.which("openFPGALoader")
    if tool is None:
        return fail("openFPGALoader is not installed: `make load` installs Debian's openfpgaloader")
    done = subprocess.run([tool, "--cable", cable, str(bitstream)], capture_output=True, text=True)
    if done.returncode != 0:
        said = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        reason = said[-1] if said else f"exit status {done.returncode}"
        return fail(f"no {board.name} reached through cable {cable!r} ({reason}); "
                    "connect and power the board, or name its cable with CABLE=...")
    print(f"loaded {bitstream} into the {board.name} (until power-off)")
    return 0


def fail(message: str) -> int:
    print(f"netblt load: {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
