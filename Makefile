# raftlog: the two set-up commands are `make run` and `make test`.
# Each creates .venv and installs what it needs, so both work on a fresh machine.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SIM_SEEDS ?= 200

.PHONY: stop demo-store run test lint typecheck contracts pytest test-slow sim-soak chaos-soak-ms fuzz bench-store bench-raft clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

## make run: the main job on embedded defaults: a local 3-node cluster (data under ./data),
## a topic, a few messages produced and consumed, the cluster status. The cluster keeps
## running; `make stop` stops it.
RAFTLOG := $(PY) -m raftlog.cli
run: $(STAMP)
	@if $(RAFTLOG) cluster status --data-dir ./data >/dev/null 2>&1; then \
		echo "a local cluster is already running (./data)"; \
	else $(RAFTLOG) cluster up --data-dir ./data; fi
	$(RAFTLOG) topic create demo --queues 4
	printf 'hello\nfrom\nraftlog\n' | $(RAFTLOG) produce demo --key greeting
	$(RAFTLOG) consume demo --group make-run --max 3 --timeout 5
	$(RAFTLOG) cluster status --data-dir ./data
	@echo
	@echo "The cluster keeps running; its data and logs are in ./data/n1 ./data/n2 ./data/n3."
	@echo "Stop it with: make stop   (or: .venv/bin/raftlog cluster down)"

## make stop: stop the local cluster `make run` started.
stop: $(STAMP)
	$(RAFTLOG) cluster down --data-dir ./data

## make demo-store: the single-node store demonstration (no cluster).
demo-store: $(STAMP)
	$(RAFTLOG) demo --data-dir ./data/store-demo

## make test: lint, types, import contracts, and the test suite: unit, simulation, real local
## clusters, short chaos runs, and (when a Docker engine answers) the container tests, which
## build raftlog:dev from this checkout first. Without Docker they are skipped and the last
## lines of the run say so.
test: lint typecheck contracts pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy -p raftlog

contracts: $(STAMP)
	$(VENV)/bin/lint-imports

pytest: $(STAMP)
	SIM_SEEDS=$(SIM_SEEDS) $(VENV)/bin/pytest -q -m "not slow" --durations=25

## make test-containers: only tests/containers (a raftlog:dev cluster in Docker, the image
## rebuilt from this checkout; skipped, saying why, when no Docker engine answers).
.PHONY: test-containers
test-containers: $(STAMP)
	$(VENV)/bin/pytest -q -m containers tests/containers

## Long suites: slow tests plus a 10,000-seed simulation soak.
test-slow: $(STAMP)
	$(VENV)/bin/pytest -q -m slow

sim-soak: $(STAMP)
	SIM_SEEDS=10000 $(VENV)/bin/pytest -q tests/sim

## make chaos-soak-ms: 20 seeded 2-minute chaos runs of a SYNC_MASTER group under its controller
## (kill, pause, partitions, controller partitions), then one table: valid runs, anomalies,
## counted loss, failover median (about 45 min). CHAOS_SOAK_ROLE=async soaks an ASYNC_MASTER
## group (its lost acknowledgements counted, with their windows); CHAOS_SOAK_SEEDS=n runs 1..n;
## CHAOS_SOAK_TARGET=containers runs every broker and controller member in its own container
## (builds raftlog:dev first; about 60 min).
CHAOS_SOAK_DIR ?= ./data/chaos-soak-ms
CHAOS_SOAK_ROLE ?= sync
CHAOS_SOAK_SEEDS ?= 20
CHAOS_SOAK_TARGET ?= local
chaos-soak-ms: $(STAMP) $(if $(filter containers,$(CHAOS_SOAK_TARGET)),image)
	rm -rf $(CHAOS_SOAK_DIR) && mkdir -p $(CHAOS_SOAK_DIR)
	for seed in $$(seq 1 $(CHAOS_SOAK_SEEDS)); do \
	  $(RAFTLOG) chaos run --target $(CHAOS_SOAK_TARGET) \
	    --replication master-slave --role $(CHAOS_SOAK_ROLE) --duration 120 \
	    --faults kill,pause,partition,controller --seed $$seed --data-dir $(CHAOS_SOAK_DIR)/run-$$seed \
	    --json $(CHAOS_SOAK_DIR)/run-$$seed.json > $(CHAOS_SOAK_DIR)/run-$$seed.log 2>&1; \
	done
	$(RAFTLOG) chaos summarize $(CHAOS_SOAK_DIR)/run-*.json

## make fuzz: the seeded gRPC fuzzer (tests/support/fuzzer.py) against a fresh local 3-node
## cluster for FUZZ_SECONDS (default 1200: 20 minutes); FUZZ_SEED replays a seed (default: the
## clock). Fails on any finding: INTERNAL/UNKNOWN, a hang, a term change, a node no longer
## serving, a traceback in a log, or a node that does not stop gracefully.
FUZZ_SECONDS ?= 1200
FUZZ_SEED ?=
fuzz: $(STAMP)
	$(PY) -m tests.support.fuzzer --seconds $(FUZZ_SECONDS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED))

bench-store: $(STAMP)
	$(PY) -m raftlog.bench.store

bench-raft: $(STAMP)
	$(PY) -m raftlog.bench.raft

## make vectors: rewrite tests/data/vectors.json from the store's codecs (a deliberate format
## change only; tests/unit/store/test_vectors.py checks the file against the codecs and
## docs/store-format.md in every `make test`).
.PHONY: vectors
vectors: $(STAMP)
	$(PY) tests/data/make_vectors.py --write

## make proto: regenerate the gRPC code (proto/*_pb2*.py, *_pb2.pyi) from proto/raftlog/v1/*.proto.
## The output is committed; tests/unit/proto checks it matches the .proto files.
.PHONY: proto
proto: $(STAMP)
	PYTHON=$(PY) proto/generate.sh

## make dist: the wheel into dist/, to install raftlog into another project:
##   pip install "dist/raftlog-0.1.0-py3-none-any.whl[testing]"
.PHONY: dist
dist: $(STAMP)
	rm -rf dist
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .
	@ls dist

clean:
	rm -rf $(VENV) ./data dist .mypy_cache .pytest_cache .ruff_cache .hypothesis

## make image: the node's container image raftlog:dev (no registry needed; docs/deploy.md).
## make compose-smoke: start deploy/compose.yaml's 3-node cluster, check it, remove it all.
.PHONY: image compose-smoke
image: $(STAMP)
	PYTHON=$(PY) deploy/build-image

compose-smoke: image
	deploy/compose-smoke

## make chaos: a 2-minute local chaos run (kill, pause, partitions; docs/chaos.md). Exit 1 on
## any anomaly. CHAOS_SEED picks the schedule.
CHAOS_SEED ?= 1
.PHONY: chaos
chaos: $(STAMP)
	$(RAFTLOG) chaos run --target local --duration 120s --faults kill,pause,partition --seed $(CHAOS_SEED)

## make bench: raftlog side by side with NATS JetStream on the same workloads (bench/compare.py;
## fetches nats-server if missing; about 10 minutes). Table on stdout; JSON and PNG chart in
## bench-results/. CI's smoke: `$(RAFTLOG) bench compare --quick`.
.PHONY: bench
bench: $(STAMP)
	mkdir -p bench-results
	$(RAFTLOG) bench compare --json bench-results/compare.json --chart bench-results/compare.png
