"""docs/register-map.md is generated from gateware/registers.py and must match it."""

from pathlib import Path

from netblt.gateware import registers

DOC = Path(__file__).resolve().parents[2] / "docs" / "register-map.md"


def test_register_map_doc_is_current():
    assert DOC.read_text() == registers.markdown(), (
        "regenerate: python -m netblt.gateware.registers > docs/register-map.md")


def test_every_register_has_a_unique_address_on_the_bus():
    assert len(registers.ADDRESS) == len(registers.REGISTERS)
    assert max(registers.ADDRESS.values()) < 1 << registers.ADDRESS_WIDTH
