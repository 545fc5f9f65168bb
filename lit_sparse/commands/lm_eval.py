"""python -m lit_sparse lm-eval: lm-evaluation-harness with lit_sparse's model registered.

Every argument goes to lm-eval's own command line (its run, ls and validate, and all their
options), after the lit_sparse model is registered (lm-eval has no entry point for outside
models). Needs the eval extra: pip install -e ".[eval]".

    python -m lit_sparse lm-eval --model lit_sparse --model_args pretrained=exported/ \\
        --tasks lit_sparse --include_path "$(python -m lit_sparse lm-eval-tasks)" \\
        --batch_size 16 --output_path results/

--model_args of the lit_sparse model: pretrained (an exported folder, a run folder or a
.ckpt file), dtype (float32, bfloat16, float16), max_length (tokens per window and
per input; default the training length), truncation (error, or left to drop the oldest
tokens of a longer input), max_gen_toks (default 256), tokenizer. The device is lm-eval's
--device (cpu, cuda, cuda:1).
"""

from __future__ import annotations

import sys

from lit_sparse.commands import reports_errors
from lit_sparse.errors import ConfigError

__all__ = ["main"]

PROG = "python -m lit_sparse lm-eval"


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


@reports_errors
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["-h"], ["--help"]):
        print(_preamble())
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
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
