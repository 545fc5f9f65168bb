"""Runs: the folders a fit writes, their locks, which run a resume continues, checkpoint files
and their checks, the Trainer the Lightning commands build, and reading a run back.

- ``folders``, ``locks``, ``launch``: ``version_N`` allocated atomically, one writer per run
  (``flock``), the run folder handed to DDP's processes.
- ``resume``, ``matching``: what ``--ckpt_path last`` continues; a checkpoint against a config.
- ``checkpoints``, ``checkpoint_folders``, ``strategy``: verified checkpoints, FSDP2's folders.
- ``trainer``, ``summary``, ``events``, ``resumed_validation``: the Trainer; what fit logs.
- ``analysis``: ``load_run``, a run's model, alphas, losses and tables.
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
