# Boxmaker's agent loop. `make run` is the quick start; `make test` is the gate.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install test lint typecheck pytest clean llama-server recordings verify-device soak run \
	serve stop bench mcp-servers gateway synapse verify-gateway

install: $(STAMP)

# Reinstall only when the package's metadata changes; the install is editable. Its output goes
# to stderr, so that `make run ARGS='--json --say Hi'` prints nothing but bxctl's on stdout.
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=..." >&2; exit 1; }
	@echo "install: making $(VENV) and installing the package and its tools (about a minute)" >&2
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) >&2
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,dev]' >&2
	@touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests bxdev
	$(BIN)/ruff format --check src tests bxdev

typecheck: $(STAMP)
	$(BIN)/mypy

# The published MCP servers the tests run (issue 30): Node ones at the versions of
# tests/mcp_servers/package-lock.json (the Python one is in the test extra). Without npm the tests
# that need them skip, and say so; CI installs Node.js first.
MCP_NODE := $(VENV)/mcp-node
$(MCP_NODE)/.stamp: tests/mcp_servers/package.json tests/mcp_servers/package-lock.json | $(STAMP)
	@if command -v npm >/dev/null 2>&1; then \
		echo "install: the Node MCP servers the tests use" >&2; \
		mkdir -p $(MCP_NODE) && cp tests/mcp_servers/package.json tests/mcp_servers/package-lock.json $(MCP_NODE)/ \
		&& (cd $(MCP_NODE) && npm ci --no-audit --no-fund --loglevel=error >&2) && touch $@; \
	else echo "npm not found: the tests of the Node MCP servers skip" >&2; fi

mcp-servers: $(MCP_NODE)/.stamp

pytest: $(STAMP) mcp-servers
	$(BIN)/pytest -q

test: lint typecheck pytest

# The long runs (SPEC section 13): the property test with thousands of random examples, and
# the reliability tests at their long size (300 kills, 10,000 fuzzed frames, 30 rounds of 100
# connections, 5,000 sessions created while 60 second loopds are refused); the counts and
# outcomes are printed at the end.
RELIABILITY := tests/reliability
soak: $(STAMP)
	BOXMAKER_SOAK=1 HYPOTHESIS_PROFILE=soak $(BIN)/pytest -q tests/loop/test_property.py $(RELIABILITY)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis

# The real llama-server and the small model, built and fetched once per machine into
# ~/.cache/boxmaker (or $$BOXMAKER_CACHE); a second run takes a moment. It says what it does on
# stderr, a line per stage; the tools' own output goes to build/build.log of the cache.
llama-server: $(STAMP)
	@$(BIN)/python -m bxdev.llama_build

# Capture recordings/*.http again from the real server (they are never edited by hand).
recordings: llama-server
	$(BIN)/python -m bxdev.capture --out recordings

# The tier that needs the real server (and Synapse, for one owner message through the gateway).
verify-device: llama-server synapse
	$(BIN)/pytest -q --device tests/device

# Synapse, the real Matrix homeserver of the gateway's tier, at the version of
# tests/gateway/synapse-requirements.txt, in a venv of its own (its many dependencies stay out of
# the project's). Without it the gateway's tests skip, and say so.
SYNAPSE := $(VENV)/synapse
$(SYNAPSE)/.stamp: tests/gateway/synapse-requirements.txt | $(STAMP)
	@echo "install: Synapse, the Matrix homeserver the gateway's tests run (a minute or two)" >&2
	@test -x $(SYNAPSE)/bin/python || $(PYTHON) -m venv $(SYNAPSE) >&2
	@$(SYNAPSE)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r tests/gateway/synapse-requirements.txt >&2
	@touch $@

synapse: $(SYNAPSE)/.stamp

# The tier that needs a real Matrix homeserver: the gateway against Synapse on loopback.
verify-gateway: synapse
	BOXMAKER_REQUIRE_MATRIX=1 $(BIN)/pytest -q --gateway tests/gateway

# The quick start: a real llama-server with the small model, brokerd serve, loopd serve, and
# bxctl chat in this terminal; the servers stop when the chat ends. State is kept in
# .boxmaker/, the file tools' folder in .boxmaker/home/workspace (or WORKSPACE=path).
# Pass bxctl chat options with ARGS, e.g. make run ARGS="--session chat-1", and llama-server's
# context and threads with CTX and THREADS (else .boxmaker/llama-server.toml's).
# Your own model: MODEL=path/to/model.gguf starts llama-server with it; SERVER=http://host:port
# uses a llama-server, Ollama or OpenAI-style server that already runs (with SERVER, MODEL names
# one of the models it lists). bxdev.run checks either before anything starts, then builds
# llama-server and fetches the small model once per machine, unless SERVER is given.
# `make serve` leaves the servers running for other terminals; `make stop` stops them.
quote = '$(subst ','\'',$(1))'
RUN_FLAGS = $(if $(CTX),--ctx $(call quote,$(CTX))) \
	$(if $(THREADS),--threads $(call quote,$(THREADS))) \
	$(if $(MODEL),--model $(call quote,$(MODEL))) $(if $(SERVER),--server $(call quote,$(SERVER)))
WORKSPACE_ENV = $(if $(WORKSPACE),BOXMAKER_WORKSPACE=$(abspath $(WORKSPACE)))
run: $(STAMP)
	@$(WORKSPACE_ENV) $(BIN)/python -m bxdev.run run $(RUN_FLAGS) -- $(ARGS)

serve: $(STAMP)
	@$(WORKSPACE_ENV) $(BIN)/python -m bxdev.run serve $(RUN_FLAGS)

# `make serve` with gatewayd beside the servers (make run and make serve start it too when
# .boxmaker/config.toml has [gateway.matrix]; this one refuses without it, saying so).
gateway: $(STAMP)
	@$(WORKSPACE_ENV) $(BIN)/python -m bxdev.run gateway $(RUN_FLAGS)

stop: $(STAMP)
	@$(BIN)/python -m bxdev.run stop

# SPEC section 12's figures, measured side by side and written to docs/benchmarks.md. It
# reports and never fails on a bar. One or more rows: make bench ROWS="overhead resume".
bench: llama-server
	$(BIN)/python -m bxdev.bench --out docs/benchmarks.md $(ROWS)
