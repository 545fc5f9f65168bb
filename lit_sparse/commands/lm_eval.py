"""``python -m lit_sparse lm-eval``: lm-evaluation-harness with lit_sparse's model registered.

Every argument goes to lm-eval's own command line once the lit_sparse model is registered
(--config FILE and --help are lm-eval's: its run --config reads a YAML of its options);
needs pip install -e ".[eval]". --model_args: pretrained (an exported or run folder, a .ckpt
file), dtype, max_length, truncation, max_gen_toks, tokenizer (docs/evaluation.md).

    python -m lit_sparse lm-eval --model lit_sparse --model_args pretrained=exported/ \\
        --tasks lit_sparse --include_path "$(python -m lit_sparse lm-eval-tasks)" \\
        --batch_size 16 --output_path results/
"""

from __future__ import annotations

import argparse
import math

from lit_sparse.commands import command
from lit_sparse.errors import ConfigError

PROG = "python -m lit_sparse lm-eval"
MODEL = "lit_sparse"  # the registered name (lit_sparse.interop.lm_eval.MODEL_NAME)


def _preamble() -> str:
    from lit_sparse.interop.shipped_tasks import TASKS_DIR, shipped_tasks

    tasks = "\n".join(f"  {t.name:<28}{t.output_type}" for t in shipped_tasks())
    doc = __doc__.split("\n\n", 1)[1].rstrip()
    return (
        f"usage: {PROG} [lm-eval's options]\n\n{doc}\n\n"
        f"lit_sparse's tasks (tag lit_sparse), in {TASKS_DIR}:\n{tasks}\n\n"
        "lm-eval's own help follows (`lm-eval run --help` for run's options: "
        f"{PROG} run --help).\n"
    )


class _Unparsed(Exception):
    """An argument list lm-eval's own parser should judge (and explain)."""


class _RunOptions(argparse.ArgumentParser):
    """The few options of lm-eval's ``run`` that are checked before lm-eval starts."""

    def __init__(self):
        super().__init__(add_help=False, allow_abbrev=False)
        self.add_argument("--model")
        self.add_argument("--limit", "-L")
        self.add_argument("--apply_chat_template", nargs="?", const=True)

    def error(self, message):
        raise _Unparsed(message)


def _check_run_options(argv: list[str]) -> None:
    """One line, before lm-eval loads anything, for a ``--limit`` of 0 or a chat template."""
    if argv and argv[0] in ("ls", "validate"):
        return
    try:
        options, _ = _RunOptions().parse_known_args(argv[1:] if argv[:1] == ["run"] else argv)
    except _Unparsed:
        return  # lm-eval's parser says what is wrong
    if options.limit is not None:
        try:
            limit = float(options.limit)
        except ValueError:
            return
        if not limit > 0 or math.isinf(limit):
            raise ConfigError(
                f"--limit {options.limit}: evaluates no documents; expected a number of "
                "documents per task >= 1, or a fraction of them in (0, 1)"
            )
    if options.model == MODEL and options.apply_chat_template is not None:
        raise ConfigError(
            "--apply_chat_template: the lit_sparse model has no chat template (it is trained "
            "on plain documents, and its tokenizer defines none); leave the option out"
        )


@command("lm-eval", raw=True)
def lm_eval(argv: list[str]) -> int:
    """lm-evaluation-harness with the lit_sparse model (every lm-eval option)."""
    argv = list(argv)
    if argv in (["-h"], ["--help"]):
        print(_preamble())
    _check_run_options(argv)
    from lit_sparse.interop.lm_eval import run_cli  # registers the model, or names the extra

    try:
        run_cli(argv, PROG)
    except SystemExit as done:  # argparse: --help, or a usage error it has printed
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 2)
    except ValueError as err:
        if str(err).startswith("Tasks not found"):
            raise ConfigError(
                f"--tasks: {err}; `{PROG} ls tasks` lists lm-eval's tasks, and lit_sparse's "
                f'(tag lit_sparse) need --include_path "$(python -m lit_sparse lm-eval-tasks)"'
            ) from None
        if "did not find any docs" in str(err):  # e.g. a task with an empty split
            raise ConfigError(
                f"--tasks: a task has no documents to evaluate ({err}); check its split, "
                "--limit and --samples"
            ) from None
        raise
    return 0
