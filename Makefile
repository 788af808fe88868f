# Torch Studio: every target sets itself up; `make run` and `make test` are all a fresh machine needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# torchvision (a test dependency: the import proof walks its models) is built against torch 2.14.1;
# the registry's 2.14.1 is the CUDA build, which also runs on a CPU-only machine.
TORCH_SPEC ?= torch==2.14.1
# pytest-xdist processes for `make test`, each test file on one of them (module fixtures stay shared);
# each imports torch (~1-2 GB), so more than the cores rarely helps.
TEST_WORKERS ?= 2
# The tests keep Python's bytecode cache (__pycache__: the project's modules and pytest's rewritten test
# modules) where the environment turns it off (PYTHONDONTWRITEBYTECODE): without it each pytest process
# compiles and rewrites every test module again (~6 s of CPU each, twice per run on two workers) and each
# worker process a test starts compiles the project again.
TEST_ENV := QT_QPA_PLATFORM=offscreen PYTHONDONTWRITEBYTECODE=
# pytest-xdist 3.8's file-by-file scheduler hangs for good once it replaces a crashed worker (pytest-xdist
# issues 1323, 1378): CI sat past its 90 minutes after one segfault. With no replacement the other worker
# runs what is left and the run ends, red, with the crash's stacks.
XDIST := -n $(TEST_WORKERS) --dist loadfile --max-worker-restart 0

.PHONY: install run test test-fast test-thorough lint demo bench gpu-check clean templates walk

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" || $(BIN)/python -m pip install -q torch
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

run: install
	$(BIN)/torch-studio

test: install
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(TEST_ENV) $(BIN)/python -m pytest -q -ra --durations=20 $(XDIST)

# `make test` with the full repetition counts: 20 random kills of a worker, every memory-prediction case,
# every template's ONNX proof (TORCH_STUDIO_TEST_THOROUGH=1; before a release).
test-thorough: install
	TORCH_STUDIO_TEST_THOROUGH=1 $(MAKE) test

# No worker or other process, no export, nothing slow (tests/conftest.py enforces it); the aim is under a
# minute (CONTRIBUTING.md has the time it takes).
test-fast: install
	$(TEST_ENV) TORCH_STUDIO_TEST_FAST=1 $(BIN)/python -m pytest -q $(XDIST) -m "not slow and not process and not export and not cuda"

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

demo: install
	QT_QPA_PLATFORM=offscreen $(BIN)/python tools/demo.py

bench: install
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The desktop walk of issue 13: the real studio under Xvfb, driven by xdotool (not part of `test`).
walk: install
	$(BIN)/python tools/desktop_walk.py

gpu-check: install
	$(BIN)/python -m pytest -q -m cuda

templates: install
	$(BIN)/python tools/make_templates.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
