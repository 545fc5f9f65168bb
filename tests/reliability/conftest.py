"""A finished tiny run through the CLI, shared by the reliability tests (they copy it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .cli_runs import (
    _HANDOFF,
    OBSERVERS,
    ROOT,
    ForkServer,
    checkpoint_every,
    config_args,
    write_callbacks,
)


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> Path:
    """``fit`` of configs/fixed.yaml + tiny.yaml for 4 steps (checkpoints every 2, the
    observers on): ``runs/fixed/version_0``. Tests copy it before changing anything."""
    workdir = tmp_path_factory.mktemp("finished")
    extra = write_callbacks(workdir / "callbacks.yaml", checkpoint_every(2), *OBSERVERS)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workdir)
        patch.setattr(sys, "argv", ["lit_sparse"])
        patch.syspath_prepend(str(ROOT))
        from lit_sparse.cli import main

        assert main(["fit", *config_args("fixed.yaml", extra)]) == 0
    return workdir / "runs" / "fixed" / "version_0"


@pytest.fixture
def in_workdir(tmp_path, monkeypatch):
    """Run in an empty folder, with a plain argv and the repository importable (faults)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv(_HANDOFF, raising=False)
    return tmp_path


@pytest.fixture(scope="module")
def fork_server():
    """A :class:`~tests.reliability.cli_runs.ForkServer` for the module's tests that kill
    fits (one import of torch and Lightning for all of them)."""
    server = ForkServer()
    yield server
    server.close()
