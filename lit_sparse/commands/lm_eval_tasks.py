"""python -m lit_sparse lm-eval-tasks: the folder of lit_sparse's lm-eval tasks (--include_path).

Rolling perplexity on the held-out plays and math problems, a multiple choice of the worked
solutions' last step and generated answers scored on their final number, their datasets built
from the installed package's held-out split when a task loads (no download).

    python -m lit_sparse lm-eval --model lit_sparse --model_args pretrained=exported/ \\
        --tasks lit_sparse --include_path "$(python -m lit_sparse lm-eval-tasks)"
    python -m lit_sparse lm-eval-tasks --list
"""

from __future__ import annotations

import argparse

from lit_sparse.commands import command_parser, reports_errors


def _parser() -> argparse.ArgumentParser:
    summary, details = __doc__.split("\n\n", 1)
    description = " ".join(summary.split(": ", 1)[1].split())
    raw = argparse.RawDescriptionHelpFormatter
    parser = command_parser("lm-eval-tasks", description, epilog=details, formatter_class=raw)
    parser.add_argument(
        "--list", action="store_true", help="list the tasks (name, kind, what each measures)"
    )
    return parser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from lit_sparse.interop.shipped_tasks import TASKS_DIR, shipped_tasks

    if not args.list:
        print(TASKS_DIR)
        return 0
    for task in shipped_tasks():
        print(f"{task.name} ({task.output_type})\n  {task.description}")
    print(f"\nin {TASKS_DIR} (--tasks lit_sparse runs them all)")
    return 0
