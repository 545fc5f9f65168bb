"""Runs: the folders a fit writes, their locks, which run a resume continues, checkpoint files
and their checks, the Trainer the Lightning commands build, and reading a run back.

- :mod:`~lit_sparse.runs.folders`: ``version_N`` allocated atomically, a run's config and
  checkpoint, evaluation folders.
- :mod:`~lit_sparse.runs.locks`: one process writes a run (``flock``; the holder is named).
- :mod:`~lit_sparse.runs.resume`: what ``--ckpt_path last`` means; values a resume may change.
- :mod:`~lit_sparse.runs.checkpoints`: atomic writes, CRC-verified reads, the final step, RNG.
- :mod:`~lit_sparse.runs.launch`: the run folder a command writes, handed to DDP's processes.
- :mod:`~lit_sparse.runs.matching`: a checkpoint checked against the command's config.
- :mod:`~lit_sparse.runs.trainer`: ``extrapolate``, a fit loop that completes a finished run,
  and fit's run handling for a command that trains outside the CLI (``run_trainer``).
- :mod:`~lit_sparse.runs.events`: a run's TensorBoard scalars.
- :mod:`~lit_sparse.runs.resumed_validation`: the validation a resume in place hides, logged again.
- :mod:`~lit_sparse.runs.summary`: what fit prints when it ends.
- :mod:`~lit_sparse.runs.analysis`: ``load_run``: a run's model, alphas, losses and tables.
"""

from lit_sparse.runs.folders import (
    allocate_folder,
    experiment_runs,
    new_eval_folder,
    new_version,
    resume_config_name,
    run_checkpoint,
    run_config,
)
from lit_sparse.runs.locks import RunLock, holds_lock, is_global_rank_zero, lock_holder, release_all

__all__ = [
    "RunLock",
    "allocate_folder",
    "experiment_runs",
    "holds_lock",
    "is_global_rank_zero",
    "lock_holder",
    "new_eval_folder",
    "new_version",
    "release_all",
    "resume_config_name",
    "run_checkpoint",
    "run_config",
]
