"""Fixtures: the tiny runs of tests/callbacks/tiny_runs.py (one module for all folders)."""

import importlib.util
import sys
from pathlib import Path

_NAME = "lit_sparse_test_runs"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        _NAME, Path(__file__).resolve().parents[1] / "callbacks" / "tiny_runs.py")
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)

from lit_sparse_test_runs import learned_run, staggered_run  # noqa: E402, F401
