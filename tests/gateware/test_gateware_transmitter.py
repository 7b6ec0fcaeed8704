from launch import cocotb_test

from netblt.gateware.transmitter import Transmitter

test_transmitter = cocotb_test(Transmitter, "transmitter", "tx_tb")
test_transmitter_64_bit = cocotb_test(Transmitter, "transmitter64", "tx_tb", data_width=64)
