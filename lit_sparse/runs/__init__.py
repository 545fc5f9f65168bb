"""Runs: run folders and locks, resuming, checkpoint files, the Trainer, reading a run back.

Imported on first use: ``run_trainer`` (a LightningCLI command in this process), ``load_run`` and
the ``read_*`` readers (a run folder and its result files read back), ``read_scalars`` (its
TensorBoard scalars), ``RUN_HANDOFF`` (the variable a parent run hands to its child),
``keep_freed_memory`` (the allocator setting fit uses)."""

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names
from lit_sparse.runs.folders import allocate_folder as allocate_folder
from lit_sparse.runs.folders import experiment_runs as experiment_runs
from lit_sparse.runs.folders import has_checkpoint as has_checkpoint
from lit_sparse.runs.folders import new_eval_folder as new_eval_folder
from lit_sparse.runs.folders import new_version as new_version
from lit_sparse.runs.folders import remove_failed_start as remove_failed_start
from lit_sparse.runs.folders import resume_config_name as resume_config_name
from lit_sparse.runs.folders import run_checkpoint as run_checkpoint
from lit_sparse.runs.folders import run_config as run_config
from lit_sparse.runs.locks import RunLock as RunLock
from lit_sparse.runs.locks import holds_lock as holds_lock
from lit_sparse.runs.locks import is_global_rank_zero as is_global_rank_zero
from lit_sparse.runs.locks import lock_holder as lock_holder
from lit_sparse.runs.locks import release_all as release_all

if TYPE_CHECKING:
    from lit_sparse.runs.analysis import load_run as load_run
    from lit_sparse.runs.analysis import read_extrapolation as read_extrapolation
    from lit_sparse.runs.analysis import read_result_json as read_result_json
    from lit_sparse.runs.analysis import resolve_run_dir as resolve_run_dir
    from lit_sparse.runs.checkpoint_folders import is_checkpoint as is_checkpoint
    from lit_sparse.runs.events import read_scalars as read_scalars
    from lit_sparse.runs.launch import RUN_HANDOFF as RUN_HANDOFF
    from lit_sparse.runs.memory import keep_freed_memory as keep_freed_memory
    from lit_sparse.runs.trainer import run_trainer as run_trainer

__getattr__, __dir__, __all__ = lazy_names(__name__)
