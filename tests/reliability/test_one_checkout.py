"""A second checkout of lit_sparse (a git worktree pinned for a study) run with this
checkout's editable install would import its own ``lit_sparse`` but this checkout's
``lit_sparse.callbacks`` and ``lit_sparse_studies`` (the install maps them to folders here):
two commits' code in one run, silently. ``import lit_sparse`` refuses it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _import(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow  # starts two processes
def test_a_second_checkout_run_with_this_ones_environment_refuses_to_import(tmp_path):
    other = tmp_path.resolve() / "worktree"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "lit_sparse", other / "lit_sparse", symlinks=True, ignore=ignore)
    mixed = _import("import lit_sparse", other)
    assert mixed.returncode == 1, mixed.stderr
    error = mixed.stderr.strip().splitlines()[-1]
    assert error.startswith("ImportError: lit_sparse.callbacks would come from"), error
    assert str(ROOT / "callbacks") in error and str(other / "lit_sparse") in error
    assert "pip install -e ." in error
    # this checkout (its callbacks and studies beside it) imports from anywhere, as before
    fine = _import("import lit_sparse", tmp_path)
    assert fine.returncode == 0, fine.stderr
