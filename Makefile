# The two set-up commands of README.md. From a fresh clone, each makes (or reuses) the
# virtual environment .venv here, installs what it needs into it, and runs:
#
#   make quickstart   torch, then lit_sparse as a user installs it (pip install -e ., no
#                     extras), then the quickstart's fit (README, "Quickstart")
#   make test         torch, then the test extras and the example plugin and task packages,
#                     then the full suite (README, "Test"); .ci/run calls it with LLAMA_CPP=1
#
# torch==2.13.0 is installed first, and only when .venv has no torch: on a CPU machine that
# is the CPU build (a bare `torch` requirement with nothing installed downloads a multi-GB
# CUDA build); on a GPU machine install the CUDA build you want into .venv first.
# Variables: PYTHON (the interpreter that makes .venv), TORCH (the torch requirement),
# LLAMA_CPP=1 (make test installs the llama-cpp extra too: it builds llama.cpp from source,
# about 11 minutes of CPU; its tests skip without it), PYTEST (the test command, run in the
# activated .venv). docs/install.md has the disk and time of each step.

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
LLAMA_CPP ?= 0
PYTEST ?= python -m pytest -q
BIN := $(VENV)/bin

.PHONY: quickstart test torch llama-cpp-note

quickstart: torch
	$(BIN)/pip install -e .
	$(BIN)/python -m lit_sparse fit --config configs/coprime.yaml --config configs/quickstart.yaml

# The example third-party packages: an attention plugin (its entry point registers `dilated`)
# and a task (`segment_copy`); the tests select them by name. The llama-cpp extra: llama.cpp beside lit_sparse on the same weights
# (tests/formats/test_gguf.py, bench decode --llama-cpp); PyPI has no Linux CPU wheel of
# llama-cpp-python, so pip builds llama.cpp from its sdist with CMake and the C++ compiler:
# 686 s of CPU time on one core (measured 2026-12-02, CMAKE_BUILD_PARALLEL_LEVEL=1), less
# wall time with more cores.
# It is built only when asked (LLAMA_CPP=1); make test says which, before anything else.
ifeq ($(LLAMA_CPP),0)
LLAMA_CPP_NOTE := make test: llama.cpp is left out and its tests skip; make test LLAMA_CPP=1 builds it from source (about 11 minutes of CPU, once)
LLAMA_CPP_INSTALL :=
else
LLAMA_CPP_NOTE := make test: LLAMA_CPP=1 installs the llama-cpp extra: pip builds llama.cpp from source, about 11 minutes of CPU once, behind a bare spinner (LLAMA_CPP=0 leaves it out)
LLAMA_CPP_INSTALL := $(BIN)/pip install -e ".[llama-cpp]"
endif

llama-cpp-note:
	@echo "$(LLAMA_CPP_NOTE)"

test: llama-cpp-note torch
	$(BIN)/pip install -e ".[test]"
	$(BIN)/pip install -e examples/lit_sparse_dilated -e examples/lit_sparse_copy
	$(LLAMA_CPP_INSTALL)
	. $(BIN)/activate && $(PYTEST)

# .venv as an earlier run may have left it: with no Python that runs (made by a Python since
# removed, or a `python -m venv` cut short) it is made again; without pip (cut short before
# pip was in) pip is put back; with a Python older than 3.10 (made by another Python) make
# stops in one line; a torch that does not import (an install cut short) is installed again.
torch: $(BIN)/python
	@$(BIN)/python -c "" 2>/dev/null || { echo "make: $(BIN)/python does not run (made by a Python since removed?): remove $(VENV) (rm -rf $(VENV)) and run make again"; exit 1; }
	@$(BIN)/python -c "import sys; sys.exit(sys.version_info < (3, 10))" || { echo "make: $(VENV) was made by Python $$($(BIN)/python -c 'import platform; print(platform.python_version())') and lit_sparse needs 3.10 or later: remove $(VENV) (rm -rf $(VENV)) and run make again, with PYTHON=python3.11 (say) if python3 is older"; exit 1; }
	@$(BIN)/python -m pip --version >/dev/null 2>&1 || { echo "make: $(VENV) has no pip (a set-up cut short): putting it back"; $(BIN)/python -m ensurepip --upgrade --default-pip >/dev/null; }
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install "$(TORCH)"
	@$(BIN)/python -c "import torch" 2>/dev/null || { echo "make: torch is in $(VENV) but does not import (an install cut short): installing it again"; $(BIN)/pip install --force-reinstall "$(TORCH)"; }

$(BIN)/python:
	@if [ -e $(VENV) ]; then echo "make: $(VENV) has no Python that runs (made by a Python since removed, or cut short): making it again"; fi
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/python -m pip install --upgrade pip
