"""Runs: run folders and locks, resuming, checkpoint files, the Trainer, reading a run back."""

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
