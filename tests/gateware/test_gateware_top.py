import pytest
from launch import cocotb_test

from netblt.hw import liteeth_core
from netblt.hw.node import NetbltNode
from netblt.sim.rtl import hdl

# The node under Verilator, make test-rtl's (a CI step): 14 cases, each in a simulation of its own.
test_top = pytest.mark.rtl(cocotb_test(NetbltNode, "node", "top_tb",
                                      sources=lambda: [liteeth_core.simulation_core(hdl.BUILD / "liteeth")], apart=True))
