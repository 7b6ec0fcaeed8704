"""The formats and the docs generated from them: docs/register-map.md from
formats/registers.py, docs/host-link.md's tables from formats/host_link.py."""

import dataclasses
import random
import struct
from pathlib import Path

import pytest

from netblt.formats import host_link, registers

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_register_map_doc_is_current():
    assert (DOCS / "register-map.md").read_text() == registers.markdown(), (
        "regenerate: python -m netblt.formats.registers > docs/register-map.md")


def test_host_link_tables_are_current():
    """The datagram section of docs/host-link.md, between its heading and the rules, is the
    generated text."""
    page = (DOCS / "host-link.md").read_text()
    section = page[page.index("## Datagrams"):page.index("## Rules")]
    assert section.endswith("\n" + host_link.markdown() + "\n"), (
        "paste the output of python -m netblt.formats.host_link into docs/host-link.md's Datagrams section")


def test_register_names_are_unique():
    """Addresses come from the order of the table, so a name given twice would silently
    shadow the first register in ADDRESS (the bus width is asserted where it is defined)."""
    names = [r.name for r in registers.REGISTERS]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)


def test_words_put_each_field_where_the_register_map_says():
    word = registers.EVENT_WORD.pack(valid=1, kind=5, slot=3, flags=0b0101, value=0xBEEF)
    assert word == 0x8000_0000 | 5 << 27 | 3 << 23 | 0b0101 << 16 | 0xBEEF
    assert registers.EVENT_WORD.unpack(word) == dict(value=0xBEEF, flags=5, slot=3, kind=5, valid=1)
    assert registers.COMMAND_WORD.pack(op=7, slot=2, flag=1) == 7 | 2 << 4 | 1 << 8
    assert registers.RECEIVED_FLAGS.unpack(0b0100) == dict(first=0, ldata=0, complete=1, last_buffer=0)
    with pytest.raises(ValueError, match="COMMAND.slot = 16 does not fit 4 bits"):
        registers.COMMAND_WORD.pack(op=1, slot=16)


def test_the_register_map_checksum_changes_with_any_field_or_width():
    """A host and a bitstream built with GEOMETRY's old 4-bit slot counts, or one register
    wider, must not agree: REGISTER_MAP would let the host misread them."""
    r = registers
    assert r.table_checksum(r.REGISTERS, r.WORDS) == r.REGISTER_MAP
    old_geometry = r.Word("GEOMETRY", (("data_width", 8), ("tx_slots", 4), ("rx_slots", 4), ("log2_max_packets", 16)))
    words = tuple(old_geometry if w is r.GEOMETRY_WORD else w for w in r.WORDS)
    assert r.table_checksum(r.REGISTERS, words) != r.REGISTER_MAP
    wider = tuple(dataclasses.replace(reg, width=reg.width + 1) if reg.name == "STATE" else reg
                  for reg in r.REGISTERS)
    assert r.table_checksum(wider, r.WORDS) != r.REGISTER_MAP


@pytest.mark.parametrize("length", [1, 3, 4, 5, 240, 548])
def test_word_writes_are_the_writes_of_each_word_with_its_first_byte_low(length):
    """A control packet's words written to SEND_DATA: the same operations as one WRITE a
    word, each word's first byte in bits 7:0, the last padded with zeros."""
    data = random.Random(length).randbytes(length)
    padded = data + bytes(-length % 4)
    words = struct.unpack(f"<{len(padded) // 4}I", padded)
    operations = [host_link.Operation(host_link.Opcode.WRITE, 0x42, word) for word in words]
    expected = b"".join(host_link.encode_operations(operations[at:at + host_link.MAX_OPERATIONS])
                        for at in range(0, len(operations), host_link.MAX_OPERATIONS))
    assert host_link.word_writes(0x42, data) == expected
    assert host_link.decode_operations(host_link.word_writes(0x42, data))[0].value & 0xFF == data[0]
