"""The board tops' pieces that need no toolchain: PLL dividers, the load step's errors."""

from __future__ import annotations

import os
import stat

import pytest

from netblt.hw import load
from netblt.hw.boards import BOARDS
from netblt.hw.clocking import PllSettings


def test_pll_dividers_match_ecppll():
    # `yowasp-ecppll -i 25 -o 50` gives CLKI_DIV 1, CLKFB_DIV 2, CLKOP_DIV 12 (VCO 600 MHz).
    assert PllSettings.exact(25e6, 50e6) == PllSettings(1, 2, 12)


def test_every_board_has_an_exact_system_clock():
    for board in BOARDS.values():
        s = PllSettings.exact(board.clock_hz, board.config.clock_hz)
        assert board.clock_hz / s.input_divider * s.feedback_divider == board.config.clock_hz
        assert 400e6 <= board.config.clock_hz * s.output_divider <= 800e6


def test_impossible_pll_is_refused():
    with pytest.raises(ValueError, match="no ECP5 PLL setting"):
        PllSettings.exact(25e6, 1e9)


@pytest.fixture
def board_build(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "ROOT", tmp_path)
    return tmp_path / "build" / "colorlight_5a75b"


def test_load_without_a_bitstream_says_to_build(board_build, capsys):
    assert load.main(["--board", "colorlight_5a75b"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "make bitstream BOARD=colorlight_5a75b" in err


def test_load_without_openfpgaloader_says_so(board_build, capsys, monkeypatch):
    board_build.mkdir(parents=True)
    (board_build / "netblt.bit").write_bytes(b"\xff")
    monkeypatch.setenv("PATH", str(board_build))
    assert load.main(["--board", "colorlight_5a75b"]) == 1
    assert "openFPGALoader is not installed" in capsys.readouterr().err


def test_load_with_no_board_is_one_clear_line(board_build, capsys, monkeypatch):
    """openFPGALoader (a stand-in that fails as the real one does with no cable) is
    called with the board's cable and the bitstream; its failure becomes one line."""
    board_build.mkdir(parents=True)
    (board_build / "netblt.bit").write_bytes(b"\xff")
    tool = board_build / "openFPGALoader"
    tool.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\n'
                    'echo "unable to open ftdi device: -3 (device not found)" >&2\n'
                    'echo "JTAG init failed with: unable to open ftdi device" >&2\nexit 1\n')
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{board_build}{os.pathsep}{os.environ['PATH']}")
    assert load.main(["--board", "colorlight_5a75b"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no colorlight_5a75b reached through cable 'ft232'" in err and "unable to open ftdi device" in err
    assert (board_build / "args").read_text().split() == ["--cable", "ft232", str(board_build / "netblt.bit")]
