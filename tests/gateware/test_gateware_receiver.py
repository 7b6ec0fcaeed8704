import pytest
from launch import cocotb_test

from netblt.gateware.receive_path import Receiver

test_receiver = cocotb_test(Receiver, "receiver", "rx_tb")
test_receiver_64_bit_16_slots = pytest.mark.dram(cocotb_test(Receiver, "receiver64x16", "rx_tb", data_width=64,
                                                             rx_slots=16))
"""Both of the default's other sizes in one build: 64-bit beats, and the most slots the
commands number (the Versa's DRAM build, so make test-dram runs it)."""
