from launch import cocotb_test

from netblt.gateware.receive_path import Receiver

test_receiver = cocotb_test(Receiver, "receiver", "rx_tb")
test_receiver_64_bit = cocotb_test(Receiver, "receiver64", "rx_tb", data_width=64)
test_receiver_16_slots = cocotb_test(Receiver, "receiver16", "rx_tb", rx_slots=16)
