# tokenmark developer entry points. `make run` and `make test` each work on a fresh clone:
# they create .venv and install what they need first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
HASH := $(shell cat pyproject.toml | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(HASH)
# `make run` needs only the base package (no extra): a fresh clone installs ~20 packages,
# not the ~100 of .[dev]; `make test` installs .[dev] over it.
RUN_STAMP := $(VENV)/.installed-run-$(HASH)
# The demo: the built-in emulated server (llama3.1-8b on an emulated H200, timing from the
# performance model, labelled as such) started on loopback and benchmarked over HTTP at a
# rate it holds; cut short by the `demo` profile (labelled on screen and in results.json).
RUN_ARGS ?= --benchmark llama3.1-8b --scenario Server --profile demo --qps 20 --accelerator H200 --precision bf16
# Backends whose tests must run (a missing one fails instead of skipping).
TOKENMARK_REQUIRE ?= postgres,hf,llamacpp,browser,ray
# Real third-party servers for the end-to-end client tests: transformers serve (CPU torch
# from the machine's local wheel) and llama.cpp's server (compiled here, ~4.5 min cold).
REALSERVERS := $(VENV)/.realservers-1

.PHONY: run test lint typecheck imports unit system-deps browser-deps bench bench-client bench-report bench-sim calibrate bench-emulator bench-scale bench-trust bench-import clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	test -x $(BIN)/pip || $(BIN)/python -m ensurepip --upgrade --default-pip >/dev/null
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@ $(RUN_STAMP)

# The demo's venv is made without a pip copy of its own (ensurepip is ~5 s of a fresh
# clone's ~60 s) when the system's pip can install into it (--python, pip >= 22.3), and its
# packages are not byte-compiled ahead (~6 s; the demo compiles the modules it imports).
# `make test` adds pip to it (so does a system pip older than 22.3, which lacks --python).
RUN_PIP := --quiet --disable-pip-version-check --no-compile
$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv --without-pip $(VENV)
	if [ -x $(BIN)/pip ]; then \
	  $(BIN)/python -m pip install $(RUN_PIP) -e .; \
	else $(PY) -m pip --python $(BIN)/python install $(RUN_PIP) -e . || \
	  { $(BIN)/python -m ensurepip --default-pip >/dev/null && \
	    $(BIN)/python -m pip install $(RUN_PIP) -e .; }; fi
	rm -f $(VENV)/.installed-run-*
	sync  # the install's ~150 MB of dirty pages reach the disk before the demo's clock
	touch $@

# Exit code 1 is an INVALID verdict, printed with its findings: the demo itself succeeded.
run: $(RUN_STAMP)
	$(BIN)/tokenmark run $(RUN_ARGS) || [ $$? -eq 1 ]

lint: $(STAMP)
	$(BIN)/ruff check tokenmark tests bench

typecheck: $(STAMP) $(REALSERVERS)
	$(BIN)/mypy tokenmark

imports: $(STAMP)
	$(BIN)/lint-imports

# Services the tests start themselves need their programs: PostgreSQL (Debian package;
# the machine image has it, a bare machine gets it from apt as root).
system-deps:
	@if ! [ -x "$$(pg_config --bindir 2>/dev/null)/initdb" ] && \
	    ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "installing postgresql (apt)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
	fi

# The browser tests drive Debian's Chromium through Playwright (pip, in .[dev]); never a
# browser download ('playwright install' is not run). ENVIRONMENT.md section 7.
browser-deps:
	@if ! [ -x /usr/bin/chromium ]; then \
	  echo "installing chromium (apt)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	fi

$(REALSERVERS): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check torch==2.13.0 \
	    "transformers[serving]==5.24.0"
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install --quiet \
	    --disable-pip-version-check "llama-cpp-python[server]==0.3.36"
	touch $@

unit: $(STAMP) $(REALSERVERS) system-deps browser-deps
	TOKENMARK_REQUIRE=$(TOKENMARK_REQUIRE) $(BIN)/pytest

test: lint typecheck imports unit

bench: $(STAMP)
	$(BIN)/python bench/runner_overhead.py
	$(BIN)/python bench/progress_view.py

# The HTTP client against a server with exact delays, beside an aiohttp baseline
bench-client: $(STAMP)
	$(BIN)/python bench/openai_client.py

# A million-query benchmark simulated (goal <= 60 s), and the model's calibration
bench-sim: $(STAMP)
	$(BIN)/python bench/sim_million.py

calibrate: $(STAMP)
	$(BIN)/python bench/calibrate.py

# What the emulated server can serve on this machine, and where to run it
bench-emulator: $(STAMP)
	$(BIN)/python bench/emulator_capacity.py

# Distributed load generation: 1 vs 2 Ray workers with null SUTs (goal >= 90% per worker)
bench-scale: $(STAMP)
	$(BIN)/python bench/scale_out.py

# What this client sustains against the built-in server (tokenmark calibrate, uncached)
bench-trust: $(STAMP)
	$(BIN)/python bench/trust_calibrate.py 3

bench-report: $(STAMP)
	$(BIN)/python bench/report_100k.py

# A whole published round, e.g. make bench-import ROUND=/path/to/inference_results_v5.1
bench-import: $(STAMP)
	$(BIN)/python bench/import_round.py $(ROUND)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
