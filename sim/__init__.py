"""Emulations that stand in for what a test or a demo does not have: a WAN (wan) and
the board's gateware under Verilator (rtl)."""
