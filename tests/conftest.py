"""Suite-wide fixtures: tests never touch the user's token cache or the network.

Under pytest-xdist each worker (and every process it starts) computes on one thread: two
workers with two torch threads each on a 2-core machine spend the second thread's time
spinning, not computing (tests that check threading set their own counts).
"""

from __future__ import annotations

import os

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    import torch

    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

from lit_sparse.kernels.denormals import denormals_flushed, flush_denormals  # noqa: E402

WORKER_FLUSHES_SUBNORMALS = denormals_flushed()  # the process's float mode before any test


@pytest.fixture(scope="session", autouse=True)
def isolated_token_cache(tmp_path_factory):
    """One token cache for the whole session (the embedded corpus is tokenized once)."""
    previous = {key: os.environ.get(key) for key in ("LIT_SPARSE_CACHE", "HF_HUB_OFFLINE")}
    os.environ["LIT_SPARSE_CACHE"] = str(tmp_path_factory.mktemp("token_cache"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield os.environ["LIT_SPARSE_CACHE"]
    for key, value in previous.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def float_mode_left_as_found():
    """A test, or a fixture it set up, that leaves subnormal floats flushed (or not) otherwise
    than the worker started errors here by name: the mode would outlive it in the worker and
    change every later test's arithmetic."""
    yield
    flushed = denormals_flushed()
    if flushed != WORKER_FLUSHES_SUBNORMALS:
        flush_denormals(WORKER_FLUSHES_SUBNORMALS)  # the next test starts as the worker did
        left = "flushed" if flushed else "kept"
        pytest.fail(f"subnormal floats left {left}, unlike the worker's start (kernels.denormals)")


TRAINING_FIXTURES = {
    "learned_run",
    "staggered_run",
    "hybrid_run",
    "finished_run",
    "crashed",
    "csv_run",
    "cli_run",
    "fit_run",
    "fixed_checkpoint",
    "tiny_study",
    "two_quickstart_runs",
    "built_runs",  # tests/studies/study/test_preset.py: the cpu preset's nine runs, built
    "results",  # tests/test_readme.py: every README command
}
"""Fixtures that train (or build whole runs) through Lightning: a test that uses one,
directly or through another fixture, is in the slow tier."""


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        if TRAINING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


# The suite is the package `tests` (the repository root is on sys.path). A crashed worker's
# fatal-signal traceback or timed-out stacks, printed by the controller:
from tests.crash_reports import (  # noqa: E402, F401
    pytest_configure,
    pytest_configure_node,
    pytest_runtest_logstart,
    pytest_testnodedown,
    pytest_timeout_cancel_timer,
    pytest_timeout_set_timer,
    pytest_unconfigure,
)

# The tiny training runs shared by the callbacks, evaluation and notebook tests:
from tests.tiny_runs import hybrid_run, learned_run, staggered_run  # noqa: E402, F401
