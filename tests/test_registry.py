"""A registry of one kind of plugin (lit_sparse.registry): an entry point whose package exits
as it imports is one warning, and the command that listed the plugins goes on (issue 57)."""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace

from lit_sparse.__main__ import main
from lit_sparse.tasks.registry import TASKS


class ExitingEntryPoint(SimpleNamespace):
    def load(self):
        sys.exit(3)


def test_a_task_package_that_exits_on_import_is_one_warning(monkeypatch, caplog, capsys):
    """Minor: a task package calling sys.exit(3) at import made ``tasks --list`` exit 3
    without a word."""
    saved = dict(TASKS.load())  # every task registered first: restored as they were
    monkeypatch.setitem(TASKS.loaded, "entry_points", False)
    exiting = ExitingEntryPoint(name="exits", value="pkg:Task", dist=SimpleNamespace(name="pkg"))
    monkeypatch.setattr(TASKS, "entry_points", lambda: [exiting])
    try:
        with caplog.at_level(logging.WARNING):
            assert main(["tasks", "--list"]) == 0
        assert "mqar" in capsys.readouterr().out
        (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert "task plugin 'exits' (pkg:Task, from pkg) is not registered" in line
        assert "it called sys.exit(3) as it was imported" in line
    finally:
        TASKS.classes.clear()
        TASKS.classes.update(saved)
