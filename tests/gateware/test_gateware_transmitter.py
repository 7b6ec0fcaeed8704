import pytest
from launch import cocotb_test

from netblt.gateware.transmit_path import Transmitter

test_transmitter = cocotb_test(Transmitter, "transmitter", "tx_tb")
test_transmitter_64_bit_16_slots = pytest.mark.dram(cocotb_test(Transmitter, "transmitter64x16", "tx_tb", data_width=64,
                                                                   tx_slots=16))
"""Both of the default's other sizes in one build: 64-bit beats, and the most slots the
commands number (the Versa's DRAM build, so make test-dram runs it), where the
segmenter's choice of the next buffer takes two registered stages."""
