# raftlog: the two set-up commands are `make run` and `make test`.
# Each creates .venv and installs what it needs, so both work on a fresh machine.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SIM_SEEDS ?= 200

.PHONY: run test lint typecheck contracts pytest test-slow sim-soak bench-store bench-raft clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

## make run: the main job on embedded defaults (data under ./data).
run: $(STAMP)
	$(PY) -m raftlog.cli demo --data-dir ./data

## make test: lint, types, import contracts, and the test suite.
test: lint typecheck contracts pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy -p raftlog

contracts: $(STAMP)
	$(VENV)/bin/lint-imports

pytest: $(STAMP)
	SIM_SEEDS=$(SIM_SEEDS) $(VENV)/bin/pytest -q -m "not slow"

## Long suites: slow tests plus a 10,000-seed simulation soak.
test-slow: $(STAMP)
	$(VENV)/bin/pytest -q -m slow

sim-soak: $(STAMP)
	SIM_SEEDS=10000 $(VENV)/bin/pytest -q tests/sim

bench-store: $(STAMP)
	$(PY) -m raftlog.bench.store

bench-raft: $(STAMP)
	$(PY) -m raftlog.bench.raft

## make proto: regenerate the gRPC code (proto/*_pb2*.py, *_pb2.pyi) from proto/raftlog/v1/*.proto.
## The output is committed; tests/unit/proto checks it matches the .proto files.
.PHONY: proto
proto: $(STAMP)
	PYTHON=$(PY) proto/generate.sh

clean:
	rm -rf $(VENV) ./data .mypy_cache .pytest_cache .ruff_cache .hypothesis
