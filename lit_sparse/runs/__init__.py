"""Runs: run folders and locks, resuming, checkpoint files, the Trainer, reading a run back."""

from lit_sparse._lazy import reexported
from lit_sparse.runs.folders import allocate_folder as allocate_folder
from lit_sparse.runs.folders import experiment_runs as experiment_runs
from lit_sparse.runs.folders import new_eval_folder as new_eval_folder
from lit_sparse.runs.folders import new_version as new_version
from lit_sparse.runs.folders import resume_config_name as resume_config_name
from lit_sparse.runs.folders import run_checkpoint as run_checkpoint
from lit_sparse.runs.folders import run_config as run_config
from lit_sparse.runs.locks import RunLock as RunLock
from lit_sparse.runs.locks import holds_lock as holds_lock
from lit_sparse.runs.locks import is_global_rank_zero as is_global_rank_zero
from lit_sparse.runs.locks import lock_holder as lock_holder
from lit_sparse.runs.locks import release_all as release_all

__all__ = sorted(reexported(__name__))
