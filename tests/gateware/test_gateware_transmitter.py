from launch import cocotb_test

from netblt.gateware.transmit_path import Transmitter

test_transmitter = cocotb_test(Transmitter, "transmitter", "tx_tb")
test_transmitter_64_bit = cocotb_test(Transmitter, "transmitter64", "tx_tb", data_width=64)
test_transmitter_16_slots = cocotb_test(Transmitter, "transmitter16", "tx_tb", tx_slots=16)
"""The most slots the commands number (the Versa's DRAM build): the segmenter's choice of
the next buffer then takes two registered stages."""
