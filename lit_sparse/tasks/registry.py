"""The task registry: short name -> task class. Built-ins register with
``@register_task("name")``; other packages through the ``lit_sparse.tasks`` entry point group
(``copy = "my_pkg.copy:CopyTask"``), loaded on the first lookup."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from lit_sparse.errors import ConfigError
from lit_sparse.registry import Registry

Kind = Literal["synthetic", "choice"]


class Task:
    """A registered task; ``kind`` is ``synthetic`` (a LightningDataModule trained on and evaluated
    at other lengths) or ``choice`` (forced-choice items scored on a text model)."""

    name: ClassVar[str] = ""
    kind: ClassVar[Kind]
    summary: ClassVar[str] = ""
    """One line for ``tasks --list``."""

    @classmethod
    def impossible_settings(cls) -> list[dict[str, Any]]:
        """Init args the task must refuse with a ConfigError naming the field (the kit's)."""
        return []

    @classmethod
    def kit_options(cls) -> dict[str, Any]:
        """Init args of a small instance for the task kit (``lit_sparse.testing.tasks``): every
        check runs on ``cls(**cls.kit_options())`` in a second or two. Default: the defaults."""
        return {}


TASKS: Registry[type[Task]] = Registry("task", Task, "lit_sparse.tasks", "lit_sparse.tasks")
"""The tasks: built-ins of this package and ``lit_sparse.tasks`` entry points."""

register_task = TASKS.register
"""Class decorator: register a :class:`Task` subclass under a name."""


def list_tasks(kind: Kind | None = None) -> list[str]:
    """Registered task names (of one ``kind``, or all), sorted."""
    return [n for n, cls in sorted(TASKS.load().items()) if kind in (None, cls.kind)]


def get_task(name: str, field: str = "task") -> type[Task]:
    """The task class registered under ``name``; an unknown name lists the valid ones."""
    return TASKS.get(name, field)


def task_options(cls: type[Task]) -> dict[str, Any]:
    """The task's init options and their defaults (``inspect.Parameter.empty``: required)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]  # after self
    return {p.name: p.default for p in parameters if p.kind in kinds}


DATA_FLAGS = ("--data", "--data.class_path")


def expand_task_names(args: Sequence[str]) -> list[str]:
    """A registered task's name after ``--data`` or ``--data.class_path`` as its class path (as
    ``--model.attention`` takes a plugin's name); dotted paths, files and other values are left
    to jsonargparse. A forced-choice task is refused in one line: fit trains synthetic ones."""
    out = list(args)
    for i, arg in enumerate(out):
        for flag in DATA_FLAGS:
            if arg == flag and i + 1 < len(out):
                out[i + 1] = _task_class_path(out[i + 1], flag)
            elif arg.startswith(flag + "="):
                out[i] = f"{flag}={_task_class_path(arg[len(flag) + 1 :], flag)}"
    return out


def _task_class_path(value: str, flag: str) -> str:
    plain = "." not in value and not value.startswith(("{", "[")) and not Path(value).exists()
    if not plain or value not in (names := list_tasks()):
        return value
    cls = TASKS.get(value)
    if cls.kind != "synthetic":
        trained = ", ".join(list_tasks("synthetic"))
        raise ConfigError(
            f"{flag} {value}: a {cls.kind} task, scored on a trained model by `python -m "
            f"lit_sparse tasks`; fit trains a synthetic task: {trained} (registered: "
            f"{', '.join(names)})"
        )
    return f"{cls.__module__}.{cls.__qualname__}"
