"""The board tops' pieces that need no toolchain: PLL dividers, a top's pins, the load
and build steps' errors."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from netblt.formats.boards import IP_ADDRESS, MAC_ADDRESS
from netblt.gateware.config import EngineConfig
from netblt.hw import alone, build, litedram_core, liteeth_core, load
from netblt.hw.boards import BOARDS, BoardTop
from netblt.hw.clocking import PllSettings
from netblt.hw.example_digitizer import ramp_source
from netblt.hw.example_sink import paced_sink
from netblt.hw.litedram import BOARD_PIN_NAMES, BoardDram
from netblt.hw.litedram_core import CHIPS
from netblt.hw.litedram_ports import BOARD_PHYS, DDR3_PADS, SDR_PADS
from netblt.hw.node import NetbltNode


def test_pll_dividers_match_ecppll():
    # `yowasp-ecppll -i 25 -o 50` gives CLKI_DIV 1, CLKFB_DIV 2, CLKOP_DIV 12 (VCO 600 MHz).
    assert PllSettings.exact(25e6, 50e6) == PllSettings(1, 2, 12)


def test_every_board_has_an_exact_system_clock():
    for board in BOARDS.values():
        s = PllSettings.exact(board.clock_hz, board.config.clock_hz)
        assert board.clock_hz / s.input_divider * s.feedback_divider == board.config.clock_hz
        assert 400e6 <= board.config.clock_hz * s.output_divider <= 800e6


def test_pll_secondary_outputs_match_ecppll():
    # `yowasp-ecppll -i 25 -o 50 --clkout1 60` gives CLKOS_DIV 10 from the same 600 MHz VCO.
    assert PllSettings.exact(25e6, 50e6, 60e6) == PllSettings(1, 2, 12, (10,))


def test_every_board_has_exact_engine_and_dram_clocks_from_one_pll():
    for board in BOARDS.values():
        dram_hz, engine_hz = CHIPS[board.chip].clock_hz, board.built("dram").config.clock_hz
        s = PllSettings.exact(board.clock_hz, engine_hz, dram_hz)
        vco = engine_hz * s.output_divider
        assert board.clock_hz / s.input_divider * s.feedback_divider == engine_hz
        assert 400e6 <= vco <= 800e6 and vco / s.secondary_dividers[0] == dram_hz


def test_impossible_pll_is_refused():
    with pytest.raises(ValueError, match="no ECP5 PLL setting makes 1000 MHz from 25 MHz"):
        PllSettings.exact(25e6, 1e9)
    with pytest.raises(ValueError, match="no ECP5 PLL setting makes 50 and 61 MHz from 25 MHz"):
        PllSettings.exact(25e6, 50e6, 61e6)  # no VCO is a multiple of both


def test_a_control_fifo_longer_than_an_event_push_is_refused():
    """The executor's proof assumes no control packet is longer than a push carries after
    its most events (sim/rtl/formal.py); a node whose FIFO holds longer ones would write
    past the push's store area."""
    NetbltNode(EngineConfig(fifo_depth=512))
    with pytest.raises(ValueError, match="the control FIFO holds packets of up to 4096 bytes; an event push carries 2052"):
        NetbltNode(EngineConfig(fifo_depth=1024))


@pytest.mark.parametrize("chip", sorted(CHIPS))
def test_the_model_core_moves_data_as_fast_as_the_board_phy(chip, tmp_path):
    """The simulations' DRAM has the board's bandwidth and timings: LiteDRAM's model takes
    DDR3 1:4 where ECP5DDRPHY takes it 1:2, so at the controller's clock it would move
    twice the Versa's bursts a second."""
    model = litedram_core.generate(chip, tmp_path / "model.v")
    board = litedram_core.generate(chip, tmp_path / "board.v", phy="board")
    assert board["clock_hz"] == CHIPS[chip].clock_hz
    for description in (model, board):
        description["bits_per_second"] = description["clock_hz"] * description["data_bits"] / description["t_ccd"]
        description["refresh_ns"] = round(description["t_rfc"] / description["clock_hz"] * 1e9)
    assert (model["bits_per_second"], model["refresh_ns"]) == (board["bits_per_second"], board["refresh_ns"])


def test_a_colorlight_with_slots_in_dram_puts_its_core_on_the_sdram_pins(tmp_path):
    """The board core (GENSDRPHY) on every pin of the platform's SDRAM, the chip's clock
    from a DDR output, and from the PLL the engine's 45 MHz (VCO 540 MHz / 12) and the
    controller's 60 MHz (/ 9, its second output); Yosys and nextpnr are not run (make
    bitstream SLOTS=dram does)."""
    board = BOARDS["colorlight_5a75b"]
    description = litedram_core.generate(board.chip, tmp_path / "litedram_core.v", phy="board")
    assert json.loads((tmp_path / "litedram_core.json").read_text()) == description
    platform = board.platform()
    platform.add_file("litedram_core.v", (tmp_path / "litedram_core.v").read_text())
    platform.build(BoardTop(board, dram=description), name="top", build_dir=str(tmp_path / "plan"),
                   do_build=False).extract(tmp_path / "plan")
    rtlil, lpf = (tmp_path / "plan" / "top.il").read_text(), (tmp_path / "plan" / "top.lpf").read_text()
    widths = {"a": 11, "dq": 32}  # the rest are single pins
    for pad in SDR_PADS:
        width, top = widths.get(pad, 1), f"sdram_0__{BOARD_PIN_NAMES.get(pad, pad)}__io"
        bits = f"[{width - 1}:0]" if width > 1 else "[0]"
        assert f"connect \\sdram_{pad} \\{top} {bits}" in rtlil
        assert lpf.count(f'LOCATE COMP "{top}') == width
    assert 'LOCATE COMP "sdram_0__clk__io" SITE "C6"' in lpf and "ODDRX1F" in rtlil
    assert "parameter \\CLKOS_DIV 9" in rtlil and "parameter \\CLKOP_DIV 12" in rtlil


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_a_users_source_feeds_the_source_port_in_place_of_the_stamps(name):
    """hw/example_digitizer.py's ramp, as docs/source-port.md builds a board with it, is in
    the top's netlist beside the node; without it the engine's stamps feed the port."""
    board = BOARDS[name]
    netlist = {source: board.platform().prepare(BoardTop(board, source=source), name="top").files["top.il"]
               for source in (ramp_source, None)}
    assert "digitizer" in netlist[ramp_source] and "digitizer" not in netlist[None]


def test_a_users_sink_takes_the_sink_port():
    """hw/example_sink.py's paced consumer, as docs/sink-port.md builds a board with it, is
    in the Versa's netlist beside the node; without it the port takes every word itself.
    The Colorlight's builds have no sink port, and say so."""
    board = BOARDS["versa_ecp5"]
    netlist = {sink: board.platform().prepare(BoardTop(board, sink=sink), name="top").files["top.il"]
               for sink in (paced_sink, None)}
    assert "consumer" in netlist[paced_sink] and "consumer" not in netlist[None]
    colorlight = BOARDS["colorlight_5a75b"]
    with pytest.raises(ValueError, match="colorlight_5a75b's build has no sink port"):
        colorlight.platform().prepare(BoardTop(colorlight, sink=paced_sink), name="top")


def test_a_versa_with_slots_in_dram_puts_its_ddr3_core_on_the_ddr3_pins(tmp_path):
    """The board core (ECP5DDRPHY) on every pin of the platform's DDR3 resource, of a
    differential pair the P pin alone, its PLL on the oscillator; the engine's PLL has
    no DRAM output (the core's own makes its clocks)."""
    board = BOARDS["versa_ecp5"]
    description = litedram_core.generate(board.chip, tmp_path / "litedram_core.v", phy="board")
    core = (tmp_path / "litedram_core.v").read_text()
    instances = re.findall(r"^([A-Z][A-Z0-9]+)\b", core, re.M)
    assert instances.count("DQSBUFM") == 2  # one per byte lane
    assert {"EHXPLLL", "ECLKSYNCB", "CLKDIVF", "DDRDLLA"} <= set(instances)
    platform = board.platform()
    platform.add_file("litedram_core.v", core)
    platform.build(BoardTop(board, dram=description), name="top", build_dir=str(tmp_path / "plan"),
                   do_build=False).extract(tmp_path / "plan")
    rtlil, lpf = (tmp_path / "plan" / "top.il").read_text(), (tmp_path / "plan" / "top.lpf").read_text()
    widths = {"a": 13, "ba": 3, "dq": 16, "dm": 2, "dqs_p": 2}  # the rest are single pins
    for pad in DDR3_PADS:
        name, width = BOARD_PIN_NAMES.get(pad, pad), widths.get(pad, 1)
        top = f"ddr3_0__{name}__p" if pad.endswith("_p") else f"ddr3_0__{name}__io"
        bits = f"[{width - 1}:0]" if width > 1 else "[0]"
        assert f"connect \\ddram_{pad} \\{top} {bits}" in rtlil
        assert lpf.count(f'LOCATE COMP "{top}') == width
    assert "__n" not in lpf  # a differential pair's N pin comes with its IO type
    assert 'LOCATE COMP "ddr3_0__clk__p" SITE "M4"' in lpf and "SSTL135D_I" in lpf
    assert "connect \\clk \\clk100_0__i" in rtlil and "CLKOS_DIV" not in rtlil


def test_a_ddr3_core_without_the_boards_oscillator_is_refused():
    """ECP5DDRPHY's core makes its clocks from the board's oscillator: wiring one without
    it fails when described, not as an undriven clock in a bitstream."""
    with pytest.raises(ValueError, match="needs the board's oscillator"):
        BoardDram(object(), BOARD_PHYS["DDR3"])
    assert BoardDram(object(), BOARD_PHYS["SDR"]).oscillator is None  # the top drives the SDR chip's clock


def test_only_the_colorlight_dram_build_leaves_out_ping(tmp_path, monkeypatch):
    """build() asks for a LiteEth core without ICMP echo on the Colorlight with its slots
    in DRAM alone, at the clock its engine runs at, and such a core has no ICMP echo;
    every core has the MAC's CRC in the system clock at 32 bits."""
    asked = {}

    class Generated(Exception):
        pass

    def generate(phy, mac, ip, clock_hz, output, ping=True):
        raise Generated(clock_hz, ping)

    monkeypatch.setattr(build.liteeth_core, "generate", generate)
    for board in BOARDS.values():
        for slots in ("block", "dram"):
            with pytest.raises(Generated) as generated:
                build.build(board, MAC_ADDRESS, IP_ADDRESS, 1, tmp_path, slots=slots)
            asked[board.name, slots] = generated.value.args
    assert asked == {("colorlight_5a75b", "block"): (50e6, True), ("colorlight_5a75b", "dram"): (45e6, False),
                     ("versa_ecp5", "block"): (50e6, True), ("versa_ecp5", "dram"): (50e6, True)}
    monkeypatch.undo()
    for ping in (False, True):
        core = liteeth_core.generate("rgmii", MAC_ADDRESS, IP_ADDRESS, 50e6,
                                     tmp_path / f"ping_{ping}.v", ping=ping).read_text()
        assert ("icmp_echo" in core) == ping
        # The transmit CRC's byte enables: four at the core's 32 bits (one at the PHY's 8).
        assert re.search(r"wire\s+\[3:0\]\s+mac_core_tx_crc_be;", core)


def test_each_build_places_with_its_own_seeds_and_router(tmp_path, monkeypatch):
    """build() tries the board's seeds in turn while timing fails, a DRAM build its own
    where it has them (the Colorlight's, 13 first), and routes a DRAM build
    with router2."""
    tried = []

    def generated(*args, **kwargs):
        output = next(arg for arg in args if hasattr(arg, "write_text"))
        output.write_text("")
        return output if output.name.startswith("liteeth") else {"clock_hz": 60e6}

    def place(command: str) -> None:
        seed = int(re.search(r"--seed (\d+) ", command).group(1))
        tried.append((seed, "--router router2" in command))
        (tmp_path / "netblt-report.json").write_text(json.dumps(
            {"fmax": {"clk": {"achieved": 40.0, "constraint": 50.0}}, "utilization": {}}))

    def platform_build(self, top, name, build_dir, nextpnr_opts, **kwargs):
        place(f'"$NEXTPNR_ECP5" {nextpnr_opts} --json x')
        (tmp_path / f"build_{name}.sh").write_text(f'"$NEXTPNR_ECP5" {nextpnr_opts} --json x\n"$ECPPACK" x\n')

    monkeypatch.setattr(build.liteeth_core, "generate", generated)
    monkeypatch.setattr(build.litedram_core, "generate", generated)
    monkeypatch.setattr(build.subprocess, "run", lambda argv, **kwargs: place(argv[-1]))
    # build() points YOSYS at yowasp's for the toolchain; left in this worker's environment,
    # Amaranth's own conversions in later tests would run that Yosys, not its built-in one.
    monkeypatch.setattr(build, "tools_environment", dict)
    seeds = {}
    for board in BOARDS.values():
        monkeypatch.setattr(board.platform, "build", platform_build)
        for slots in ("block", "dram"):
            tried.clear()
            report, seed = build.build(board, MAC_ADDRESS, IP_ADDRESS, 1, tmp_path,
                                       slots=slots)
            assert not report.clocks[0].met and seed == tried[-1][0]
            seeds[board.name, slots] = tried[:]
    assert seeds == {("colorlight_5a75b", "block"): [(5, False), (4, False)],
                     ("colorlight_5a75b", "dram"): [(13, True), (5, True)],
                     ("versa_ecp5", "block"): [(s, False) for s in (1, 2, 3, 4)],
                     ("versa_ecp5", "dram"): [(s, True) for s in (1, 2, 3, 4)]}


def test_a_toolchain_that_stops_is_one_line_naming_its_logs(tmp_path, monkeypatch, capsys):
    def stopped(*args, **kwargs):
        raise build.subprocess.CalledProcessError(143, ["sh", "build_netblt.sh"])

    monkeypatch.setattr(build, "build", stopped)
    assert build.main(["--board", "colorlight_5a75b", "--output", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (f"error: the toolchain stopped (exit status 143): its logs are netblt.rpt "
                                       f"(synthesis) and netblt.tim (place and route) in {tmp_path}\n")


def test_a_board_whose_dram_levelling_is_untried_says_so_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit:
        build.main(["--board", "versa_ecp5", "--slots", "dram"])
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "error: versa_ecp5's DRAM reads need levelling, which the host does but no board has tried yet, "
        "so its slots stay in block RAM (--untried builds it anyway, for its size and timing)")


@pytest.mark.parametrize("command", [build.main, alone.main])
def test_an_output_that_is_a_file_is_one_line(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setattr(build, "build", lambda *args: pytest.fail("built into a file"))
    monkeypatch.setattr(alone.litedram_core, "generate", lambda *args, **kwargs: pytest.fail("built into a file"))
    taken = tmp_path / "notes.txt"
    taken.write_text("kept")
    with pytest.raises(SystemExit) as exit:
        command(["--board", "versa_ecp5", "--output", str(taken), *(["--part", "engine"] if command is alone.main else [])])
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: --output {taken} is a file, not a folder")
    assert taken.read_text() == "kept"


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
