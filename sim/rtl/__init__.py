"""The gateware under Verilator: the harness the cocotb tests and benchmarks share
(hdl, testbench, beats, register_host, dram_tops, ethernet_wire), and the simulated board
that ``netblt sim-board`` serves (sim_board)."""
