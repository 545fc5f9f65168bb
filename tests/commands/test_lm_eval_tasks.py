"""``python -m lit_sparse lm-eval-tasks`` (lit_sparse/commands/lm_eval_tasks.py): the folder
for ``--include_path``, and ``--list`` naming each task, its kind and what it measures."""

from __future__ import annotations

from lit_sparse.__main__ import main
from lit_sparse.interop.shipped_tasks import TASKS_DIR, shipped_tasks


def test_it_prints_the_folder_alone(capsys):
    assert main(["lm-eval-tasks"]) == 0
    assert capsys.readouterr().out == f"{TASKS_DIR}\n"


def test_the_list_names_each_task_its_kind_and_what_it_measures(capsys):
    assert main(["lm-eval-tasks", "--list"]) == 0
    out = capsys.readouterr().out
    for task in shipped_tasks():
        assert f"{task.name} ({task.output_type})\n  {task.description}\n" in out
    assert out.endswith(f"\nin {TASKS_DIR} (--tasks lit_sparse runs them all)\n")
