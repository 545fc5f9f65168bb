"""The task registry: built-ins found by discovery, lookups that name the registered tasks,
entry points isolated to one warning line, and docs/tasks.md's table (the listing command:
tests/commands/test_tasks.py)."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import lit_sparse.tasks
from lit_sparse.errors import ConfigError
from lit_sparse.tasks import TASKS, MQARDataModule, get_task, list_tasks, recall_data_from_config

PACKAGE = Path(lit_sparse.tasks.__file__).parent
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "tasks.md"


def test_every_task_module_of_the_package_is_registered():
    declared = {
        name
        for module in PACKAGE.glob("*.py")
        for name in re.findall(r'^@register_task\("(\w+)"\)', module.read_text(), re.M)
    }
    assert declared and TASKS.builtin_names() == sorted(declared)
    assert list_tasks("synthetic") == [n for n in list_tasks() if get_task(n).kind == "synthetic"]
    assert {"mqar", "distance", "passkey"} <= set(list_tasks("synthetic"))
    assert {"lego", "ruler_vt"} <= set(list_tasks("choice"))


def test_an_unknown_task_lists_the_registered_ones():
    with pytest.raises(ConfigError, match=r"task='mqr': unknown task; registered: .*mqar"):
        get_task("mqr")


def test_a_run_config_names_its_task_by_class_path_or_registered_name():
    for class_path in (
        "lit_sparse.tasks.mqar.MQARDataModule",
        "lit_sparse.tasks.MQARDataModule",
        "mqar",
    ):
        data = recall_data_from_config({"class_path": class_path, "init_args": {"seq_len": 32}})
        assert type(data) is MQARDataModule and data.seq_len == 32
    with pytest.raises(ConfigError, match="not a synthetic task; registered: distance, mqar"):
        recall_data_from_config({"class_path": "lego"})


def test_docs_list_every_built_in_task():
    rows = set(re.findall(r"^\| `(\w+)` \| (synthetic|choice) \|", DOCS.read_text(), re.M))
    assert rows == {(name, get_task(name).kind) for name in TASKS.builtin_names()}


class FakeEntryPoint(SimpleNamespace):
    def load(self):
        raise ImportError("No module named 'missing_dependency'")


def test_a_broken_task_entry_point_is_one_warning_and_the_rest_works(monkeypatch, caplog):
    saved = dict(TASKS.classes)
    monkeypatch.setitem(TASKS.loaded, "entry_points", False)
    broken = FakeEntryPoint(name="broken_demo", value="pkg:Task", dist=SimpleNamespace(name="pkg"))
    monkeypatch.setattr(TASKS, "entry_points", lambda: [broken])
    try:
        with caplog.at_level(logging.WARNING):
            names = list_tasks()
        assert "broken_demo" not in names and "mqar" in names
        (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert "task plugin 'broken_demo'" in line and "from pkg" in line
        assert "ImportError: No module named 'missing_dependency'" in line
    finally:
        TASKS.classes.clear()
        TASKS.classes.update(saved)


def test_fit_takes_a_registered_task_by_name():
    """Issue 57 (minor, first hour 4): ``--data segment_copy`` was refused though attention
    plugins work by name; a choice task is one line saying fit trains synthetic ones."""
    from lit_sparse.tasks.registry import expand_task_names

    copy = "lit_sparse_copy.segment_copy.SegmentCopyDataModule"
    given = ["fit", "--data", "segment_copy", "--data.init_args.segment", "4"]
    assert expand_task_names(given) == ["fit", "--data", copy, *given[3:]]
    assert expand_task_names(["--data.class_path=mqar"]) == [
        "--data.class_path=lit_sparse.tasks.mqar.MQARDataModule"
    ]
    kept = ["--data", "configs/data/mqar.yaml", "--data.class_path", "MQARDataModule"]
    assert expand_task_names(kept) == kept
    with pytest.raises(ConfigError, match=r"^--data lego: a choice task, .* fit trains a synth"):
        expand_task_names(["--data", "lego"])


@pytest.mark.slow  # parses fit's options (seconds)
def test_fit_parses_a_task_given_by_name(capsys, monkeypatch):
    from lit_sparse.cli import main

    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    config = str(ROOT / "configs" / "sliding_window.yaml")
    with pytest.raises(SystemExit) as info:
        main(["fit", "--config", config, "--data", "segment_copy", "--print_config"])
    assert info.value.code in (0, None)
    assert "class_path: lit_sparse_copy.segment_copy.SegmentCopyDataModule" in (
        capsys.readouterr().out
    )
