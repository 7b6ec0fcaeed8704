from launch import cocotb_test

from netblt.gateware.engine import Engine

test_engine = cocotb_test(Engine, "engine", "engine_tb")
