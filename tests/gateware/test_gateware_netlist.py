"""The node's testbench against the netlist Yosys synthesizes for a bitstream (sim/rtl/netlist.py):
ARP, ping, a host-link request and NETBLT data each way, with the RTL's own checks.

Synthesis and the netlist's build take minutes, so these run in `make netlist` (CI runs
it after make test), not in make test."""

import functools

import pytest

from netblt.sim.rtl import hdl, netlist, sim_board

from launch import HERE

CASES = ["test_arp_request_is_answered", "test_ping_is_answered", "test_link_request_runs_whole",
         "test_sent_buffer_arrives_as_valid_frames", "test_frames_are_reassembled_into_their_slot"]
NAME = "node_netlist"


@functools.cache
def built():
    design = sim_board.design(None)
    folder = hdl.BUILD / "netlist"
    synthesized = netlist.synthesize(design, folder, NAME)
    return hdl.build_text(synthesized.read_text(), NAME, netlist.cell_models(folder), include=[netlist.CELLS.parent])


@pytest.mark.netlist
@pytest.mark.timeout(3600)  # the first case waits for synthesis and the netlist's build
@pytest.mark.xdist_group(NAME)
@pytest.mark.parametrize("case", CASES)
def test_netlist(case):
    outcome = hdl.run_once(built(), NAME, "top_tb", HERE, [case])
    if failure := outcome[case]:
        pytest.fail(failure, pytrace=False)
