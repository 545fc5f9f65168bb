"""``python -m lit_sparse lm-eval-tasks``: the folder of lit_sparse's lm-eval tasks."""

from __future__ import annotations

from lit_sparse.commands import command


@command("lm-eval-tasks")
def lm_eval_tasks(list: bool = False) -> int:
    """The folder of lit_sparse's lm-eval tasks (for --include_path).

    Rolling perplexity on the held-out plays and math problems, a multiple choice of the worked
    solutions' last step and generated answers scored on their final number, their datasets built
    from the installed package's held-out split when a task loads (no download).

        python -m lit_sparse lm-eval --model lit_sparse --model_args pretrained=exported/ \\
            --tasks lit_sparse --include_path "$(python -m lit_sparse lm-eval-tasks)"
        python -m lit_sparse lm-eval-tasks --list

    Args:
        list: list the tasks (name, kind, what each measures)
    """
    from lit_sparse.interop.shipped_tasks import TASKS_DIR, shipped_tasks

    if not list:
        print(TASKS_DIR)
        return 0
    for task in shipped_tasks():
        print(f"{task.name} ({task.output_type})\n  {task.description}")
    print(f"\nin {TASKS_DIR} (--tasks lit_sparse runs them all)")
    return 0
