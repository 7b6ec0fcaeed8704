"""The Colorlight 5A-75B bitstream, built as `make bitstream` builds it (9 to 17 minutes on
one core here; `make test-bitstream`, which CI runs beside make netlist and make formal).

The build itself fails when a clock misses its constraint; this also checks that each
clock was constrained at the frequency the design runs it at, so "met" means something.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from netblt.hw.boards import BOARDS
from netblt.hw.build import NAME, ROOT
from netblt.hw.nextpnr import read_report

BOARD = BOARDS["colorlight_5a75b"]


@pytest.mark.bitstream  # 9 to 17 minutes on one core: a CI step of its own (make test-bitstream)
@pytest.mark.timeout(1800)  # synthesis, up to four placements, and yowasp's first compile on a fresh machine
def test_colorlight_bitstream_builds_with_timing_met():
    out = ROOT / "build" / "ci" / BOARD.name
    done = subprocess.run([sys.executable, "-m", "netblt.hw.build", "--board", BOARD.name, "--output", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert (out / f"{NAME}.bit").stat().st_size > 100_000
    report = read_report(out / f"{NAME}-report.json")
    constraints = sorted(round(clock.constraint_mhz) for clock in report.clocks)
    assert constraints == [BOARD.config.clock_hz // 1_000_000, 125], report.clocks
    assert all(clock.met for clock in report.clocks)
    assert "met" in (out / "report.txt").read_text()
