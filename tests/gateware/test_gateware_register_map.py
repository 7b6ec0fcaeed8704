"""docs/register-map.md is generated from gateware/registers.py and must match it."""

from pathlib import Path

from netblt.gateware import registers

DOC = Path(__file__).resolve().parents[2] / "docs" / "register-map.md"


def test_register_map_doc_is_current():
    assert DOC.read_text() == registers.markdown(), (
        "regenerate: python -m netblt.gateware.registers > docs/register-map.md")


def test_register_names_are_unique():
    """Addresses come from the order of the table, so a name given twice would silently
    shadow the first register in ADDRESS (the bus width is asserted where it is defined)."""
    names = [r.name for r in registers.REGISTERS]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
