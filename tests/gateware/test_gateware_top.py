from launch import cocotb_test

from netblt.hw import liteeth_core
from netblt.hw.node import NetbltNode
from netblt.sim.rtl import hdl

test_top = cocotb_test(NetbltNode, "node", "top_tb",
                       sources=lambda: [liteeth_core.simulation_core(hdl.BUILD / "liteeth")], apart=True)
