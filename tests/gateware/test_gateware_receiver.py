from launch import cocotb_test

from netblt.gateware.config import EngineConfig
from netblt.gateware.receiver import Receiver

runner, test_receiver = cocotb_test(lambda: Receiver(EngineConfig()), "receiver", "rx_tb")
