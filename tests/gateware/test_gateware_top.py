from launch import cocotb_test

from netblt.gateware.config import EngineConfig
from netblt.hw import liteeth_core
from netblt.hw.node import NetbltNode
from netblt.sim import hdl


def liteeth_gmii():
    return [liteeth_core.generate("gmii", liteeth_core.parse_mac(liteeth_core.MAC_ADDRESS),
                                  liteeth_core.IP_ADDRESS, EngineConfig().clock_hz, hdl.BUILD / "liteeth" / "liteeth_gmii.v")]


test_top = cocotb_test(NetbltNode, "top", "top_tb", sources=liteeth_gmii)
