from launch import cocotb_test

from netblt.formats.host_link import LINK_PORT
from netblt.gateware.link_intake import LinkIntake

from link_intake_tb import BOARD_INT, DEPTH

test_link_intake = cocotb_test(lambda config: LinkIntake(BOARD_INT, LINK_PORT, DEPTH), "link_intake", "link_intake_tb")
