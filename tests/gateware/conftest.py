"""Gateware tests: test_*.py launch the cocotb testbenches in *_tb.py (see launch.py)."""
