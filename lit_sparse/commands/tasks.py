"""``python -m lit_sparse tasks``: choice tasks on a checkpoint; ``--list``: every task."""

from __future__ import annotations

from pathlib import Path

from lit_sparse.commands import command
from lit_sparse.errors import ConfigError
from lit_sparse.io.atomic import write_json


def task_listing() -> str:
    """Every registered task: name, kind, origin, summary, options."""
    from lit_sparse.tasks import TASKS, get_task, list_tasks, task_options

    builtins = set(TASKS.builtin_names())
    blocks = []
    for name in list_tasks():
        cls = get_task(name)
        source = "built-in" if name in builtins else cls.__module__
        options = ", ".join(
            f"{option}={default!r}" for option, default in task_options(cls).items()
        )
        blocks.append(
            f"{name} ({cls.kind}, {source}): {cls.summary}\n"
            f"  class_path: {cls.__module__}.{cls.__qualname__}\n  options: {options}"
        )
    return "\n".join(blocks)


@command("tasks", positional=("path",))
def tasks(
    path: str | None = None,
    list: bool = False,
    tasks: list[str] | None = None,
    per_group: int = 120,
    seed: int = 0,
    tokenizer: str | None = None,
    batch_size: int = 64,
    json: str | None = None,
) -> int:
    """The registered choice tasks on a checkpoint; --list: every task.

    Loads a run directory or a checkpoint, encodes the items with the run's tokenizer
    (``--tokenizer`` overrides) and prints per task and group the forced-choice accuracy, the
    chance rate and the share of items given the most common answer (1.0: the same answer to
    every prompt).

        python -m lit_sparse tasks runs/quickstart/coprime/version_0
        python -m lit_sparse tasks runs/coprime/version_0/checkpoints/last.ckpt --tasks lego
        python -m lit_sparse tasks --list

    Args:
        path: a run directory or a .ckpt file
        list: list the registered tasks
        tasks: which tasks (default: every choice task)
        per_group: items per length/hops
        seed: seed of the items
        tokenizer: default: the run's tokenizer
        batch_size: items scored per forward pass
        json: also write the results to this file
    """
    if list:
        print(task_listing())
        return 0
    if path is None:
        raise ConfigError("a run directory or a .ckpt file is required (or --list)")
    from lit_sparse.callbacks.tasks import choice_tasks, encoder
    from lit_sparse.data.tokenizer import run_tokenizer
    from lit_sparse.tasks import list_tasks

    choices = list_tasks("choice")
    if unknown := [t for t in tasks or () if t not in choices]:
        known = ", ".join(choices)
        raise ConfigError(f"--tasks {unknown[0]}: no choice task of that name; {known}")
    from lit_sparse.data.tokenizer import load_tokenizer
    from lit_sparse.evaluation.forced_choice import results_table
    from lit_sparse.runs.analysis import load_run
    from lit_sparse.runs.checkpoint_files import check_tokenizer

    chosen = choice_tasks(tasks or choices, per_group, seed)
    folder = Path(path)
    if not folder.exists():
        raise ConfigError(f"path={path!r}: no such run directory or checkpoint")
    run = load_run(folder)
    if run.module is None:
        raise ConfigError(f"path={path!r}: no checkpoint found (checkpoints/*.ckpt)")
    spec = tokenizer or run_tokenizer(run.config)
    loaded = load_tokenizer(spec)
    check_tokenizer(run.tokenizer_sha256, loaded.sha256, spec, run.checkpoint)
    encode = encoder(loaded.tokenizer)
    results = [
        task.score(run.module.model, encode, batch_size=batch_size) for task in chosen.values()
    ]
    print(f"{run.checkpoint} (step {run.step}), tokenizer {spec}")
    print(results_table(results))
    if json:
        record = {"checkpoint": str(run.checkpoint), "step": run.step, "tokenizer": spec}
        write_json(json, {**record, "tasks": [r.as_dict() for r in results]})
    return 0
