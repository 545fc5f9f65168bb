"""``python -m lit_sparse recall``: a recall run's accuracy at longer lengths and under both
``new_offsets`` policies, on its checkpoint.

For RUN_DIR (a version folder, its experiment folder or a checkpoint file) trained on a recall
task (configs/data/mqar.yaml, distance.yaml, passkey.yaml), prints each held-out set's accuracy
at each length and policy, on the run's own held-out examples (as fit's ``recall.json``).

    python -m lit_sparse recall runs/recall/distance/fib_fixed/seed0 --multiples 1 4 16 64
    python -m lit_sparse recall RUN_DIR --lengths 2048 --new-offsets drop --out recall-2k.json
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from lit_sparse.commands import command_parser, reports_errors
from lit_sparse.errors import ConfigError
from lit_sparse.io.atomic import write_json


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("recall", __doc__.split("\n\n")[1])
    parser.add_argument("run", metavar="RUN_DIR", help="a run folder or checkpoint")
    parser.add_argument(
        "--multiples",
        type=float,
        nargs="+",
        help="lengths as multiples of the training length (default 1 4 16 64; MQAR: its "
        "settings' lengths)",
    )
    parser.add_argument("--lengths", type=int, nargs="+", help="explicit lengths (replace them)")
    parser.add_argument(
        "--new-offsets",
        nargs="+",
        choices=("use", "drop"),
        default=["use", "drop"],
        help="policies for the distances that appear only beyond the training length",
    )
    parser.add_argument(
        "--val-examples", type=int, help="examples per held-out set (default: the run's)"
    )
    parser.add_argument("--out", help="also write the result to this JSON file")
    return parser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.val_examples is not None and args.val_examples < 1:
        raise ConfigError(f"--val-examples={args.val_examples}: expected an integer >= 1")
    if args.out and Path(args.out).expanduser().is_dir():
        raise ConfigError(
            f"--out {args.out}: a folder; give the JSON file to write (e.g. "
            f"{Path(args.out) / 'recall.json'})"
        )
    from lit_sparse.callbacks import RecallEvaluation
    from lit_sparse.evaluation.recall import evaluate_recall
    from lit_sparse.runs.analysis import load_run
    from lit_sparse.tasks import recall_data_from_config

    callback = RecallEvaluation(args.multiples, args.lengths, args.new_offsets)  # checks them
    try:
        run = load_run(args.run)
    except FileNotFoundError as err:
        raise ConfigError(f"RUN_DIR {args.run}: {err}") from None
    if run.module is None:
        raise ConfigError(f"RUN_DIR {args.run}: no checkpoint to evaluate in {run.path}")
    overrides = {} if args.val_examples is None else {"val_examples": args.val_examples}
    datamodule = recall_data_from_config(run.config.get("data"), **overrides)
    lengths = callback.evaluation_lengths(datamodule, run.module.config.context_length)
    progress = functools.partial(print, file=sys.stderr, flush=True)
    result = evaluate_recall(run.module, datamodule, lengths, args.new_offsets, progress=progress)
    result.step, result.checkpoint = run.step, str(run.checkpoint)
    print(result.to_markdown())
    if args.out:
        write_json(args.out, result.to_dict())
    return 0
