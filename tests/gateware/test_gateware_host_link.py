from launch import cocotb_test

from netblt.gateware.host_link import HostLink
from netblt.gateware.link_executor import STAGED_DOWNLOAD_QUEUE, BoardIdentity

from link_intake_tb import BOARD_INT

# The engine model's store is slow, as slots in DRAM are: the executor gets their queue.
test_host_link = cocotb_test(lambda config: HostLink(BoardIdentity(BOARD_INT, 0x026E626C7401),
                                                     download_queue=STAGED_DOWNLOAD_QUEUE), "host_link", "host_link_tb")
