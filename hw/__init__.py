"""Boards: their tops, clocking, the LiteEth and LiteDRAM cores, bitstream build and
load, and their reports. Imports the gateware and the formats, never the host side."""
