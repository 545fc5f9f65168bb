"""Run one function of the data tests in a new interpreter and return its result.

The DataLoader forks its workers, as the library's loaders do in a user's ``fit``. Forked
from an xdist worker that has already run hundreds of tests (live loader iterators with
their feeder threads, TensorBoard writer threads), a worker can inherit a lock that one of
those threads held and hang: seen once in four full runs here and once in CI. A new
interpreter forks from a clean process, the one a user's run forks from.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

_CHILD = """
import importlib, sys, torch
module, name, args, path = torch.load(sys.argv[1], weights_only=False)
sys.path[:0] = path
result = getattr(importlib.import_module(module), name)(*args)
torch.save(result, sys.argv[2])
"""


def in_fresh_process(func: Callable[..., Any], *args: Any, work_dir: Path) -> Any:
    """``func(*args)`` run in a new Python process; ``func`` is module-level, args picklable."""
    call, result = work_dir / "fresh_call.pt", work_dir / "fresh_result.pt"
    torch.save((func.__module__, func.__qualname__, args, list(sys.path)), call)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(call), str(result)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return torch.load(result, weights_only=False)
