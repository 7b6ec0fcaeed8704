"""Board tops, the LiteEth core, bitstream build and load, and their reports."""
