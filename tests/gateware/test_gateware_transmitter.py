from netblt.gateware.config import EngineConfig
from netblt.gateware.transmitter import Transmitter

from launch import cocotb_test

runner, test_transmitter = cocotb_test(lambda: Transmitter(EngineConfig()), "transmitter", "tx_tb")
