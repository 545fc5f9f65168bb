"""``python -m lit_sparse tasks`` (lit_sparse/commands/tasks.py): the listing of every task
with its options, and each bad path or task name one line before any model is loaded. A run
scored end to end: tests/tasks/test_choice.py."""

from __future__ import annotations

import re

from lit_sparse.__main__ import main as lit_main
from lit_sparse.tasks import TASKS, get_task, list_tasks


def test_the_listing_shows_every_task_with_its_options(capsys):
    assert lit_main(["tasks", "--list"]) == 0
    out = capsys.readouterr().out
    builtins = set(TASKS.builtin_names())
    for name in list_tasks():
        source = "built-in" if name in builtins else re.escape(get_task(name).__module__)
        assert re.search(rf"^{name} \((synthetic|choice), {source}\): \S", out, re.M), name
    assert "class_path: lit_sparse.tasks.mqar.MQARDataModule" in out
    assert "gap=0" in out and "per_group=120" in out


def test_command_refuses_a_missing_path(capsys, tmp_path):
    assert lit_main(["tasks", str(tmp_path / "nope")]) == 2
    assert "no such run directory or checkpoint" in capsys.readouterr().err


def test_no_path_or_an_unknown_task_is_one_line(capsys, tmp_path):
    assert lit_main(["tasks"]) == 2
    assert "a run directory or a .ckpt file is required (or --list)" in capsys.readouterr().err
    assert lit_main(["tasks", str(tmp_path), "--tasks", "lego", "mqar"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --tasks mqar: no choice task of that name; lego")
    assert len(err.splitlines()) == 1
