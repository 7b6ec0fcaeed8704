"""The gateware's properties, proven with SymbiYosys (sim/rtl/formal.py; `make formal`).

Each proof must pass, and each broken variant of its block must fail on the property
that names its bug: a one-line change to the block's source, as a mutation test makes,
searched with the same harness and the properties alone (sim/rtl/formal.py ``refute``), so
that a property no bug can fail would show.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
from pathlib import Path
from typing import NamedTuple

import pytest

from netblt.sim.rtl.formal import PROOFS, Proof, prove, refute

pytestmark = pytest.mark.formal  # make formal, a CI step of its own: not make test


class Variant(NamedTuple):
    proof: str
    """Whose block is changed."""
    line: str
    change: str
    """What ``line`` of the block's source becomes."""
    rule: str
    """The property it must break."""
    search: int | None = None
    """Steps it is searched to, where fewer than its proof's find it."""


BROKEN = {
    "pacer: a burst of one too many": Variant(
        "pacer", "fresh = Mux(boundary, self.burst_size, tokens)",
        "fresh = Mux(boundary, self.burst_size + 1, tokens)", "at most a burst in an interval"),
    "pacer: an interval a cycle short": Variant(
        "pacer", "left.eq(Mux(boundary, self.interval - 1, left - 1))",
        "left.eq(Mux(boundary, self.interval - 2, left - 1))", "an interval is interval cycles long"),
    "pacer: smooth mode banks one grant more": Variant(
        "pacer", "earned = Mux(due & (tokens < self.burst_size), 1, 0)",
        "earned = Mux(due & (tokens <= self.burst_size), 1, 0)", "at most a burst banks up"),
    "reassembly: a write not kept inside its slot": Variant(
        "reassembly",
        "self.write.en.eq(Mux(write_ok & inside, beat.keep, 0))", "self.write.en.eq(Mux(write_ok, beat.keep, 0))",
        "a write lands only in a slot posted for its packet's buffer"),
    "reassembly: no check that a packet fits its slot": Variant(
        "reassembly",
        "((p >= cfg.max_packets) | (self.start + hdr.length > cfg.slot_bytes), Drop.OUTSIDE)",
        "(p >= cfg.max_packets, Drop.OUTSIDE)", "a packet counts only once it is written whole in its place"),
    "reassembly: a packet for a buffer no slot waits for": Variant(
        "reassembly", "(~self.found, Drop.UNPOSTED)",
        "(Const(0), Drop.UNPOSTED)", "a write lands only in a slot posted for its packet's buffer"),
    "reassembly: another packet's bit": Variant(
        "reassembly", "self.bit.eq(1 << hdr.packet[:5])",
        "self.bit.eq(1 << hdr.packet[1:6])", "the bit set is the packet's own"),
    "link executor: the expected ID skips one": Variant(
        "link_executor",
        'm.d.sync += [regs["LINK_NEXT_ID"].eq(regs["LINK_NEXT_ID"] + 1), self.kept.bit_select(self.slot, 1).eq(0)]',
        'm.d.sync += [regs["LINK_NEXT_ID"].eq(regs["LINK_NEXT_ID"] + 2), self.kept.bit_select(self.slot, 1).eq(0)]',
        "the expected ID moves on by one as a request runs, and only then"),
    "link executor: a request ahead of the expected one runs": Variant(
        "link_executor",
        'with m.Elif((f["type"] == F.Type.RESEND) | (behind != 0)):', 'with m.Elif(f["type"] == F.Type.RESEND):',
        "a request runs only if it is the one expected"),
    "link executor: another host's request runs": Variant(
        "link_executor", "with m.Elif(~owner):", "with m.Elif(0):",
        "a request runs only if it is the one expected"),
    "link executor: a push number skipped": Variant(
        "link_executor", 'self.reply_id.eq(regs["LINK_PUSH_NUMBER"] + 1),',
        'self.reply_id.eq(regs["LINK_PUSH_NUMBER"] + 2),', "pushes are numbered without gaps"),
    "link executor: events pushed before their hold": Variant(
        "link_executor", 'events_due = self.events_waiting & ((self.cycles - self.events_since)[:32] > regs["PUSH_HOLD"])',
        'events_due = self.events_waiting', "events alone wait PUSH_HOLD for a control packet"),
    "link executor: a take-over with no silence": Variant(
        "link_executor", 'taking_over = f["flags"][0] & silent_long',
        'taking_over = f["flags"][0]', "a session changes hands only after its owner's silence"),
    "link executor: a refusal written over a kept reply": Variant(
        "link_executor", "self.begin(SCRATCH, self.fields[\"type\"] | F.REPLY, status)",
        "self.begin(self.slot * AREA_WORDS, self.fields[\"type\"] | F.REPLY, status)",
        "a reply is sent only for a request that ran", search=14),
    "link executor: a replay of a reply not kept": Variant(
        "link_executor", "kept = (behind >= 1) & (behind <= F.WINDOW) & self.kept.bit_select(self.slot, 1)",
        "kept = (behind >= 1) & (behind <= F.WINDOW)", "a replay is of the request it names"),
    "segmenter: the last packet sent whole": Variant(
        "segmenter", "m.d.sync += [made.ldata.eq(last), made.data_bytes.eq(size), made.high_ack.eq(s.high_ack)]",
        "m.d.sync += [made.ldata.eq(last), made.data_bytes.eq(packet_size), made.high_ack.eq(s.high_ack)]",
        "a packet's length is what its slot holds at its place"),
    "segmenter: no LDATA where the rest is a whole packet": Variant(
        "segmenter", "last = remaining <= packet_size", "last = remaining < packet_size",
        "a packet's length is what its slot holds at its place"),
    "segmenter: a resend past the buffer's end": Variant(
        "segmenter", "with m.If(~self.table.loaded[made.slot] | (offset >= loaded.data.length)):",
        "with m.If(~self.table.loaded[made.slot]):", "a packet's run is fetched from its place in its slot"),
    "segmenter: a first sending skipped": Variant(
        "segmenter", "table.next_packet[best].eq(table.next_packet[best] + 1)]",
        "table.next_packet[best].eq(table.next_packet[best] + 2)]", "a buffer's first sendings are its packets in order"),
    "segmenter: a run fetched from the wrong word": Variant(
        "segmenter", "self.base = made.slot * self.config.slot_words + (offset >> (W.bit_length() - 1))",
        "self.base = made.slot * self.config.slot_words + (offset >> W.bit_length())",
        "a packet's run is fetched from its place in its slot"),
    "segmenter: the last buffer's flag lost": Variant(
        "segmenter", "made.last_buffer.eq(loaded.data.last_buffer)]", "made.last_buffer.eq(0)]",
        "a packet carries its slot's buffer"),
}
"""Each broken variant of a proof's block."""


def broken_block(block: type, line: str, change: str) -> type:
    """``block`` with ``line`` of its source file changed: a module of its own, so the
    real one is untouched."""
    path, name = Path(inspect.getsourcefile(block)), block.__name__
    source = path.read_text()
    assert source.count(line) == 1, f"{path.name} no longer has the line this variant changes: {line}"
    module = types.ModuleType(f"netblt.gateware._broken_{name.lower()}")
    module.__package__ = "netblt.gateware"
    sys.modules[module.__name__] = module  # where its dataclasses look themselves up as they are made
    try:
        exec(compile(source.replace(line, change), str(path), "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return getattr(module, name)


DEEP = 24
"""Searches deeper than this take a minute or more each."""

DEEP_MARKS = [pytest.mark.timeout(1800)]
"""A deep search is bounded work, not a hang: on a slow CI machine, beside the bitstream's
build, one took over 300 s, pytest's limit a test (pyproject.toml)."""


@pytest.mark.parametrize("name", PROOFS)
def test_the_property_is_proven(name, tmp_path):
    outcome = prove(PROOFS[name], tmp_path)
    assert outcome.passed, outcome.summary


def searched(variant: Variant) -> Proof:
    return dataclasses.replace(PROOFS[variant.proof], search=variant.search or PROOFS[variant.proof].search)


@pytest.mark.parametrize("variant", [pytest.param(name, marks=DEEP_MARKS if searched(variant).search > DEEP else [])
                                     for name, variant in BROKEN.items()])
def test_a_broken_block_fails_its_property(variant, tmp_path):
    proof, line, change, rule, _ = BROKEN[variant]
    outcome = refute(searched(BROKEN[variant]), broken_block(PROOFS[proof].block, line, change), tmp_path)
    assert not outcome.passed, f"{variant}: no counterexample\n{outcome.summary}"
    assert rule in outcome.failed, f"{variant}: failed, but not on '{rule}'\n{outcome.summary}"
