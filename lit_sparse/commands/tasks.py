"""``python -m lit_sparse tasks``: choice tasks on a checkpoint; ``--list``: every registered task.

Loads a run directory or a checkpoint, encodes the items with the run's tokenizer
(``--tokenizer`` overrides) and prints per task and group the forced-choice accuracy, the chance
rate and the share of items given the most common answer (1.0: the same answer to every prompt).

    python -m lit_sparse tasks runs/quickstart/coprime/version_0
    python -m lit_sparse tasks runs/coprime/version_0/checkpoints/last.ckpt --tasks lego
    python -m lit_sparse tasks --list
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lit_sparse.commands import command_parser, reports_errors
from lit_sparse.data.tokenizer import run_tokenizer
from lit_sparse.errors import ConfigError
from lit_sparse.io.atomic import write_json


def _parser() -> argparse.ArgumentParser:
    from lit_sparse.tasks import list_tasks

    choices = list_tasks("choice")
    parser = command_parser("tasks", __doc__.split("\n\n")[1])
    parser.add_argument("path", nargs="?", help="a run directory or a .ckpt file")
    parser.add_argument("--list", action="store_true", help="list the registered tasks")
    parser.add_argument("--tasks", nargs="+", choices=choices, default=choices, help="which tasks")
    parser.add_argument("--per-group", type=int, default=120, help="items per length/hops")
    parser.add_argument("--seed", type=int, default=0, help="seed of the items")
    parser.add_argument("--tokenizer", help="default: the run's tokenizer")
    parser.add_argument("--batch-size", type=int, default=64, help="items scored per forward pass")
    parser.add_argument("--json", help="also write the results to this file")
    return parser


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


@reports_errors
def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list:
        print(task_listing())
        return 0
    if args.path is None:
        parser.error("a run directory or a .ckpt file is required (or --list)")
    from lit_sparse.callbacks.tasks import choice_tasks, encoder
    from lit_sparse.data.tokenizer import load_tokenizer
    from lit_sparse.evaluation.forced_choice import results_table
    from lit_sparse.runs.analysis import load_run
    from lit_sparse.runs.checkpoints import check_tokenizer

    tasks = choice_tasks(args.tasks, args.per_group, args.seed)
    path = Path(args.path)
    if not path.exists():
        raise ConfigError(f"path={args.path!r}: no such run directory or checkpoint")
    run = load_run(path)
    if run.module is None:
        raise ConfigError(f"path={args.path!r}: no checkpoint found (checkpoints/*.ckpt)")
    spec = args.tokenizer or run_tokenizer(run.config)
    tokenizer = load_tokenizer(spec)
    check_tokenizer(run.tokenizer_sha256, tokenizer.sha256, spec, run.checkpoint)
    encode = encoder(tokenizer.tokenizer)
    results = [
        task.score(run.module.model, encode, batch_size=args.batch_size) for task in tasks.values()
    ]
    print(f"{run.checkpoint} (step {run.step}), tokenizer {spec}")
    print(results_table(results))
    if args.json:
        record = {"checkpoint": str(run.checkpoint), "step": run.step, "tokenizer": spec}
        write_json(args.json, {**record, "tasks": [r.as_dict() for r in results]})
    return 0
