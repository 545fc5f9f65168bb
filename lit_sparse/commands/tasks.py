"""``python -m lit_sparse tasks``: LEGO and RULER variable tracking on a checkpoint.

Loads a run directory or a checkpoint (:func:`lit_sparse.load_run`), encodes the items with
the run's tokenizer (``data.init_args.tokenizer`` of its config.yaml; ``--tokenizer``
overrides) and prints, per task and per chain length / number of hops, the forced-choice
accuracy, the chance rate and the share of items given the most common answer (1.0: the
model answers the same whatever the prompt, the paper's degenerate result). The callback
``lit_sparse.callbacks.TaskAccuracy`` does the same at every validation of a fit.

    python -m lit_sparse tasks runs/quickstart/coprime/version_0
    python -m lit_sparse tasks runs/coprime/version_0/checkpoints/last.ckpt --tasks lego
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lit_sparse.commands import command_parser, reports_errors
from lit_sparse.data.tokenizer import run_tokenizer
from lit_sparse.errors import ConfigError
from lit_sparse.io.atomic import write_json

__all__ = ["main", "run_tokenizer"]


def _parser() -> argparse.ArgumentParser:
    from lit_sparse.callbacks.tasks import TASKS

    parser = command_parser("tasks", __doc__.split("\n\n")[1])
    parser.add_argument("path", help="a run directory or a .ckpt file")
    parser.add_argument(
        "--tasks", nargs="+", choices=TASKS, default=list(TASKS), help="which tasks"
    )
    parser.add_argument("--per-group", type=int, default=120, help="items per length/hops")
    parser.add_argument("--seed", type=int, default=0, help="seed of the items")
    parser.add_argument("--tokenizer", default=None, help="default: the run's tokenizer")
    parser.add_argument("--batch-size", type=int, default=64, help="items scored per forward pass")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    return parser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from lit_sparse.callbacks.tasks import GROUP_LABELS, encoder, task_items
    from lit_sparse.data.tokenizer import load_tokenizer
    from lit_sparse.evaluation.forced_choice import results_table, score_task
    from lit_sparse.runs.analysis import load_run
    from lit_sparse.runs.checkpoints import check_tokenizer

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
        score_task(
            task,
            GROUP_LABELS[task],
            run.module.model,
            encode,
            task_items(task, args.per_group, args.seed),
            batch_size=args.batch_size,
        )
        for task in args.tasks
    ]
    print(f"{run.checkpoint} (step {run.step}), tokenizer {spec}")
    print(results_table(results))
    if args.json:
        write_json(
            args.json,
            {
                "checkpoint": str(run.checkpoint),
                "step": run.step,
                "tokenizer": spec,
                "tasks": [r.as_dict() for r in results],
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
