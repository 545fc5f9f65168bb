"""The lm-eval tasks lit_sparse ships: YAML files in ``lm_eval_tasks/`` (package data), passed
to lm-eval with ``--include_path`` (``python -m lit_sparse lm-eval-tasks`` prints the folder)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

TASKS_DIR = Path(__file__).resolve().parent / "lm_eval_tasks"
TASK_TAG = "lit_sparse"
"""The tag every shipped task carries: ``--tasks lit_sparse`` runs them all."""


@dataclass(frozen=True)
class ShippedTask:
    name: str
    output_type: str
    description: str
    """The YAML's leading comment."""


class _TaskYaml(yaml.SafeLoader):
    """lm-eval's task YAML, its ``!function`` references read as plain strings."""


_TaskYaml.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def shipped_tasks() -> list[ShippedTask]:
    """Each shipped task, by name: its output type and what it measures."""
    tasks = []
    for path in sorted(TASKS_DIR.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        config = yaml.load(text, Loader=_TaskYaml)  # noqa: S506 - a safe loader
        comment = " ".join(
            line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")
        )
        tasks.append(ShippedTask(config["task"], config["output_type"], comment))
    return tasks
