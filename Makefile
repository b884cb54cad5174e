# Two commands do all the set-up on a fresh machine (README.md):
#   make demo   - own virtualenv, private broker, simulated fleet, console
#   make test   - own virtualenv with test deps, the whole suite against a real Mosquitto
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
NODES ?= 64
# The demo's broker: auto (Mosquitto if installed, else the embedded amqtt), mosquitto or amqtt;
# BROKER_KIND=amqtt tries the zero-install path on a machine that has Mosquitto (Debian's is in
# /usr/sbin, which the demo finds off PATH too). BROKER_PORT=0: a free loopback port.
BROKER_KIND ?= auto
BROKER_PORT ?= 0
# setuptools' editable build warns, in a boxed "!!" block, that folders named like the package
# may shadow it (console/ and agents/ are linked into fleetdeck/, so its strict layout check
# fails): information only, which a newcomer read as a failed install.
PIP_INSTALL := PYTHONWARNINGS=ignore::UserWarning $(BIN)/python -m pip install -q

.PHONY: demo test lint check bench clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "fleetdeck needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[test]'
	@touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/fleetdeck demo --nodes $(NODES) --broker-kind $(BROKER_KIND) --port $(BROKER_PORT)

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/mypy -p fleetdeck
	$(BIN)/lint-imports

check: lint test

# One table, every target of the issue: measured figure, unit, fleet size, met or not (a few
# minutes on 2 cores). BENCH_JSON=FILE also writes the rows as JSON; BENCH_NODES sizes the live
# ingest run (16384 on a machine with the cores for it); BENCH_QUICK=1 runs every benchmark in
# its quick mode (about a minute).
BENCH_NODES ?= 2048
bench: $(VENV)/.installed-test
	$(BIN)/python bench/run_all.py --ingest-nodes $(BENCH_NODES) \
		$(if $(BENCH_JSON),--json $(BENCH_JSON)) $(if $(BENCH_QUICK),--quick)

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
