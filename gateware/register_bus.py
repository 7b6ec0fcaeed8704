"""The register formats of formats/registers.py in gateware terms: the buses that carry
them, and their words as Amaranth layouts and values."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..formats.layout import Word
from ..formats.registers import ADDRESS_WIDTH, DRAM_CSR_ADDRESS_BITS


class RegisterBus(wiring.Signature):
    """Word-addressed 32-bit register access; read data follows ``r_en`` by one cycle."""

    def __init__(self) -> None:
        super().__init__({
            "addr": Out(ADDRESS_WIDTH),
            "w_en": Out(1),
            "w_data": Out(32),
            "r_en": Out(1),
            "r_data": In(32),
        })


class DramCsrBus(wiring.Signature):
    """The host's way to a LiteDRAM core's CSR bus (hw/litedram_core.CsrPort): ``start``
    an access (``write`` it, or read) of ``address``; ``busy`` until ``read_data`` is its answer."""

    def __init__(self) -> None:
        super().__init__({
            "start": Out(1),
            "write": Out(1),
            "address": Out(DRAM_CSR_ADDRESS_BITS),
            "write_data": Out(32),
            "read_data": In(32),
            "busy": In(1),
            "ignored": In(1),
        })


def word_layout(word: Word) -> data.StructLayout:
    """The word's fields as a layout, bit 0 first."""
    return data.StructLayout(dict(word.fields))


def word_value(word: Word, **values: Value | int) -> Value:
    """The word in gateware: each field's value in its place (numbers as constants)."""
    return Cat(*(Const(values[name], width) if isinstance(values[name], int) else values[name]
                 for name, width in word.fields))
