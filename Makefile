# netblt: every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# A real transfer between two software endpoints on loopback, through the WAN relay.
demo: $(STAMP)
	$(BIN)/python -m netblt.host.demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m netblt.host.bench

clean:
	rm -rf $(VENV) build
