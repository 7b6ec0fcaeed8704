from launch import cocotb_test

from netblt.gateware.host_link import HostLink
from netblt.gateware.link_executor import BoardIdentity

from link_intake_tb import BOARD_INT

test_host_link = cocotb_test(lambda config: HostLink(BoardIdentity(BOARD_INT, 0x026E626C7401)), "host_link",
                             "host_link_tb")
