"""``python -m lit_sparse recall``: a recall run's accuracy at longer lengths and under both
``new_offsets`` policies, on its checkpoint."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Literal

from lit_sparse.commands import command
from lit_sparse.errors import ConfigError
from lit_sparse.io.atomic import write_json


@command("recall", positional=("run",))
def recall(
    run: str,
    multiples: list[float] | None = None,
    lengths: list[int] | None = None,
    new_offsets: list[Literal["use", "drop"]] = ["use", "drop"],  # noqa: B006 (never changed)
    val_examples: int | None = None,
    out: str | None = None,
) -> int:
    """A recall run's accuracy at longer lengths, under both new_offsets policies.

    For RUN_DIR (a version folder, its experiment folder or a checkpoint file) trained on a
    recall task (configs/data/mqar.yaml, distance.yaml, passkey.yaml), prints each held-out
    set's accuracy at each length and policy, on the run's own held-out examples (as fit's
    ``recall.json``).

        python -m lit_sparse recall runs/recall/distance/fib_fixed/seed0 --multiples 1 4 16 64
        python -m lit_sparse recall RUN_DIR --lengths 2048 --new-offsets drop --out recall-2k.json

    Args:
        run: a run folder or checkpoint (RUN_DIR)
        multiples: lengths as multiples of the training length (default 1 4 16 64; MQAR: its
            settings' lengths)
        lengths: explicit lengths (replace them)
        new_offsets: policies for the distances that appear only beyond the training length
        val_examples: examples per held-out set (default: the run's)
        out: also write the result to this JSON file
    """
    if val_examples is not None and val_examples < 1:
        raise ConfigError(f"--val-examples={val_examples}: expected an integer >= 1")
    if out and Path(out).expanduser().is_dir():
        raise ConfigError(
            f"--out {out}: a folder; give the JSON file to write (e.g. {Path(out) / 'recall.json'})"
        )
    from lit_sparse.callbacks import RecallEvaluation
    from lit_sparse.evaluation.recall import evaluate_recall
    from lit_sparse.runs.analysis import load_run
    from lit_sparse.tasks import recall_data_from_config

    callback = RecallEvaluation(multiples, lengths, new_offsets)  # checks them
    try:
        loaded = load_run(run)
    except FileNotFoundError as err:
        raise ConfigError(f"RUN_DIR {run}: {err}") from None
    if loaded.module is None:
        raise ConfigError(f"RUN_DIR {run}: no checkpoint to evaluate in {loaded.path}")
    overrides = {} if val_examples is None else {"val_examples": val_examples}
    datamodule = recall_data_from_config(loaded.config.get("data"), **overrides)
    lengths = callback.evaluation_lengths(datamodule, loaded.module.config.context_length)
    progress = functools.partial(print, file=sys.stderr, flush=True)
    result = evaluate_recall(loaded.module, datamodule, lengths, new_offsets, progress=progress)
    result.step, result.checkpoint = loaded.step, str(loaded.checkpoint)
    print(result.to_markdown())
    if out:
        write_json(out, result.to_dict())
    return 0
