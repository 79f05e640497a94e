# scalerl-harness: the two commands are `make demo` and `make test`; both set up what they need.
# Every target is safe to re-run: a second `make setup` reuses .venv when pyproject.toml is unchanged.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Installed before the project so pip takes the CPU build on this machine's disk; a bare `torch`
# would pull a multi-GB CUDA build. GPU clusters: make setup TORCH_SPEC='torch==2.13.0+cu126' (or '').
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.scalerl-setup
BENCH_STAMP := $(VENV)/.scalerl-setup-bench
PYTEST_ARGS ?=

# The demo: the tiny LOO sweep (baseline + 8 variants) on the local executor into ./scalerl.db, with
# a live progress table, then the sigmoid fits and the knob verdict table, then the HTML report,
# then how to watch the store in a browser (`scalerl ui`).
# A failed variant does not stop the demo: fit marks it unfit and says why.
DEMO_DB ?= sqlite:///./scalerl.db
DEMO = { $(VENV)/bin/scalerl sweep recipes/tiny-loo.yaml --executor local --db $(DEMO_DB) --wait \
	  || echo "demo: some runs failed; see: $(VENV)/bin/scalerl status tiny-loo"; } \
	&& $(VENV)/bin/scalerl fit tiny-loo --db $(DEMO_DB) \
	&& $(VENV)/bin/scalerl report tiny-loo --db $(DEMO_DB) -o report.html \
	&& echo "demo: report written to $$(pwd)/report.html" \
	&& echo "demo: to watch this store live in a browser: $(VENV)/bin/scalerl ui --db $(DEMO_DB)  (then open http://127.0.0.1:8765/)"

.PHONY: help setup setup-bench demo test test-floors lint format format-check types ensure-postgres \
	testbed-up testbed-down testbed-status bench clean distclean

help:
	@echo "make demo          run the demo (sets up .venv and what it needs)"
	@echo "make test          ruff, mypy and the whole pytest suite against real PostgreSQL and Slurm"
	@echo "make setup         create/refresh .venv ($(TORCH_SPEC), then -e '.[dev]')"
	@echo "make test-floors   the torch-free tests with every dependency at its declared floor (.venv-floors)"
	@echo "make lint | types | format | format-check"
	@echo "make testbed-up | testbed-down | testbed-status   the single-node Slurm testbed (root)"
	@echo "make bench         run every benchmark, python -m bench.NAME (installs the [bench] extra)"
	@echo "make clean | distclean"

# The stamp holds pyproject.toml's hash, so a changed dependency list reinstalls and nothing else does.
setup:
	@hash="$$(sha256sum pyproject.toml | cut -c1-64)"; \
	if [ -x "$(PY)" ] && [ "$$(cat $(STAMP) 2>/dev/null)" = "$$hash" ]; then \
	  echo "setup: $(VENV) is up to date"; exit 0; fi; \
	if [ ! -x "$(PY)" ]; then \
	  echo "setup: creating $(VENV) with $$($(PYTHON) --version 2>&1)"; \
	  $(PYTHON) -m venv $(VENV) || { echo "setup: '$(PYTHON) -m venv' failed; on Debian/Ubuntu: apt-get install python3-venv" >&2; exit 1; }; \
	fi; \
	if [ -n "$(TORCH_SPEC)" ]; then $(PIP) install -q '$(TORCH_SPEC)' || exit 1; fi; \
	$(PIP) install -q -e '.[dev]' || exit 1; \
	rm -f $(BENCH_STAMP); echo "$$hash" > $(STAMP); echo "setup: $(VENV) ready"

setup-bench: setup
	@hash="$$(sha256sum pyproject.toml | cut -c1-64)"; \
	if [ "$$(cat $(BENCH_STAMP) 2>/dev/null)" = "$$hash" ]; then exit 0; fi; \
	$(PIP) install -q -e '.[dev,bench]' && echo "$$hash" > $(BENCH_STAMP)

demo: setup
	$(DEMO)

# Lint, types and tests all run even when an earlier one fails, so one CI run shows every problem.
test: setup ensure-postgres
	@bash slurm/testbed/up || echo "make test: the Slurm testbed is not up (reason above): Slurm tests skip locally and fail in CI"
	@fail=0; SECONDS=0; \
	echo "== ruff check"; $(VENV)/bin/ruff check . || fail=1; \
	echo "== ruff format --check"; $(VENV)/bin/ruff format --check . || fail=1; \
	echo "== mypy (t=$${SECONDS}s)"; $(VENV)/bin/mypy || fail=1; \
	echo "== pytest (t=$${SECONDS}s)"; $(VENV)/bin/pytest -rsfE $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests; an empty suite is a failure" >&2; fi; \
	if [ $$rc -ne 0 ]; then fail=1; fi; \
	if [ $$fail -ne 0 ]; then echo "make test: FAILED after $${SECONDS}s (see above)" >&2; \
	else echo "make test: passed in $${SECONDS}s"; fi; \
	exit $$fail

# CI's second leg (.ci/run calls .ci/floors after `make test`): its own venv, .venv-floors, with every
# dependency pinned to the lower bound pyproject.toml declares (.ci/floors_constraints.py).
test-floors: ensure-postgres
	@bash slurm/testbed/up || echo "make test-floors: the Slurm testbed is not up (reason above): Slurm tests skip locally and fail in CI"
	@bash .ci/floors

lint: setup
	$(VENV)/bin/ruff check .

types: setup
	$(VENV)/bin/mypy

format: setup
	$(VENV)/bin/ruff format .

format-check: setup
	$(VENV)/bin/ruff format --check .

# The PostgreSQL fixture uses initdb/pg_ctl from Debian's postgresql (/usr/lib/postgresql/*/bin).
ensure-postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "make: PostgreSQL server binaries are missing and installing them needs root: sudo apt-get install postgresql" >&2; exit 0; fi; \
	echo "make: installing postgresql with apt-get"; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql </dev/null >/tmp/scalerl-apt-postgresql.log 2>&1 \
	  || { apt-get update </dev/null >>/tmp/scalerl-apt-postgresql.log 2>&1; \
	       DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql </dev/null >>/tmp/scalerl-apt-postgresql.log 2>&1; } \
	  || { echo "make: apt-get install postgresql failed; see /tmp/scalerl-apt-postgresql.log" >&2; exit 1; }

testbed-up:
	bash slurm/testbed/up

testbed-down:
	bash slurm/testbed/down

testbed-status:
	bash slurm/testbed/status

# Every benchmark is a module run from the repository root: bench/NAME.py with a __main__ guard
# (bench/data.py and other shared modules have none) or a bench/NAME/ package with a __main__.py.
bench: setup-bench
	@fail=0; ran=0; \
	for path in bench/*.py bench/*/__main__.py; do \
	  [ -e "$$path" ] || continue; \
	  case "$$path" in */__main__.py) mod="$${path%/__main__.py}";; \
	    *) grep -q '^if __name__ == "__main__":' "$$path" || continue; mod="$${path%.py}";; esac; \
	  mod="$$(echo "$$mod" | tr / .)"; ran=1; \
	  echo "== python -m $$mod"; $(PY) -m "$$mod" || fail=1; \
	done; \
	if [ $$ran -eq 0 ]; then echo "bench: no benchmarks found"; fi; \
	exit $$fail

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .scalerl report.html scalerl.db scalerl.db-* bench/.work
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -print0 | xargs -0 rm -rf
	find . -path ./$(VENV) -prune -o -name '*.egg-info' -type d -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV) .venv-floors
