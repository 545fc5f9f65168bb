# The two set-up commands of README.md. From a fresh clone, each makes (or reuses) the
# virtual environment .venv here, installs what it needs into it, and runs:
#
#   make quickstart   torch, then lit_sparse as a user installs it (pip install -e ., no
#                     extras), then the quickstart's fit (README, "Quickstart")
#   make test         torch, then the test extras, the example plugin and task packages
#                     and the llama-cpp extra, then the full suite (README, "Test"); .ci/run
#                     calls it
#
# torch==2.13.0 is installed first, and only when .venv has no torch: on a CPU machine that
# is the CPU build (a bare `torch` requirement with nothing installed downloads a multi-GB
# CUDA build); on a GPU machine install the CUDA build you want into .venv first.
# Variables: PYTHON (the interpreter that makes .venv), TORCH (the torch requirement),
# LLAMA_CPP=0 (skip the llama-cpp extra: it builds llama.cpp from source, about 11 minutes
# of CPU; its tests skip without it), PYTEST (the test command, run in the activated .venv).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
LLAMA_CPP ?= 1
PYTEST ?= python -m pytest -q
BIN := $(VENV)/bin

.PHONY: quickstart test torch

quickstart: torch
	$(BIN)/pip install -e .
	$(BIN)/python -m lit_sparse fit --config configs/coprime.yaml --config configs/quickstart.yaml

# The example third-party packages: an attention plugin (its entry point registers `dilated`)
# and a task (`segment_copy`); the tests select them by name. The llama-cpp extra: llama.cpp beside lit_sparse on the same weights
# (tests/formats/test_gguf.py, bench decode --llama-cpp); PyPI has no Linux CPU wheel of
# llama-cpp-python, so pip builds llama.cpp from its sdist with CMake and the C++ compiler:
# 686 s of CPU time on one core (measured 2026-12-02, CMAKE_BUILD_PARALLEL_LEVEL=1), less
# wall time with more cores.
test: torch
	$(BIN)/pip install -e ".[test]"
	$(BIN)/pip install -e examples/lit_sparse_dilated -e examples/lit_sparse_copy
	if [ "$(LLAMA_CPP)" != 0 ]; then $(BIN)/pip install -e ".[llama-cpp]"; fi
	. $(BIN)/activate && $(PYTEST)

torch: $(BIN)/python
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install "$(TORCH)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
