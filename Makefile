# netblt: every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-gateware clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test,hw]'
	touch $@

# A real transfer between two software endpoints on loopback, through the WAN relay.
demo: $(STAMP)
	$(BIN)/python -m netblt.host.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m netblt.host.bench

# Cycles per packet against the wire, pacing accuracy, synth_ecp5 utilisation, nextpnr Fmax (about 6 minutes).
bench-gateware: $(STAMP)
	$(BIN)/python -m netblt.sim.gateware_bench

clean:
	rm -rf $(VENV) build
