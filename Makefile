# Boxmaker's agent loop. `make run` is the quick start; `make test` is the gate.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install test lint typecheck pytest clean llama-server recordings verify-device soak run bench

install: $(STAMP)

# Reinstall only when the package's metadata changes; the install is editable.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=..." >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bxdev
	$(BIN)/ruff format --check src tests bxdev

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck pytest

# The long runs (SPEC section 13): the property test with thousands of random examples, and
# the reliability tests at their long size (300 kills, 10,000 fuzzed frames, 30 rounds of 100
# connections, 5,000 sessions created while 60 second loopds are refused); the counts and
# outcomes are printed at the end.
RELIABILITY := tests/test_crash.py tests/test_faults.py tests/test_fuzz.py tests/test_access.py \
	tests/test_storage_faults.py tests/test_load.py tests/test_one_loopd.py
soak: $(STAMP)
	BOXMAKER_SOAK=1 HYPOTHESIS_PROFILE=soak $(BIN)/pytest -q tests/test_property.py $(RELIABILITY)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# The real llama-server and the small model, built and fetched once per machine into
# ~/.cache/boxmaker (or $$BOXMAKER_CACHE); a second run takes seconds.
llama-server: $(STAMP)
	$(BIN)/python -m bxdev.llama_build

# Capture recordings/*.http again from the real server (they are never edited by hand).
recordings: llama-server
	$(BIN)/python -m bxdev.capture --out recordings

# The tier that needs the real server.
verify-device: llama-server
	$(BIN)/pytest -q --device tests/device

# The quick start: a real llama-server with the small model, loopd serve, and bxctl chat in
# this terminal; both servers stop when the chat ends. State is kept in .boxmaker/.
# Pass bxctl chat options with ARGS, e.g. make run ARGS="--session chat-1".
run: llama-server
	$(BIN)/python -m bxdev.run $(ARGS)

# SPEC section 12's figures, measured side by side and written to docs/benchmarks.md. It
# reports and never fails on a bar. One or more rows: make bench ROWS="overhead resume".
bench: llama-server
	$(BIN)/python -m bxdev.bench --out docs/benchmarks.md $(ROWS)
