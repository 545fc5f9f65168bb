"""FSDP2 training: Lightning's ModelParallelStrategy, checkpoint folders saved atomically."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.pytorch.strategies import ModelParallelStrategy, Strategy
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from lit_sparse.errors import CheckpointError, ConfigError, StorageError, error_chain
from lit_sparse.io.atomic import AtomicFolder, storage_error, storage_failure, write_text
from lit_sparse.io.class_paths import names_subclass
from lit_sparse.runs.checkpoint_files import verify_checkpoint
from lit_sparse.runs.checkpoint_folders import CHECKSUMS, file_checksums, is_sharded_checkpoint

STRATEGY_CONFIG = "configs/strategy/fsdp2.yaml"


def check_resume_strategy(ckpt_path: Any, strategy: Any) -> None:
    """CheckpointError when a sharded ``ckpt_path`` would resume under a strategy but FSDP2."""
    if not is_sharded_checkpoint(ckpt_path) or names_subclass(strategy, ModelParallelStrategy):
        return  # a ModelParallelStrategy resumes a folder of shards
    shown = strategy.get("class_path") if hasattr(strategy, "get") else strategy
    if isinstance(strategy, Strategy):
        shown = type(strategy).__name__
    raise CheckpointError(
        f"ckpt_path={str(ckpt_path)!r} was saved by FSDP2 (a folder of shards) and this "
        f"command trains with trainer.strategy={shown!r}: only FSDP2 resumes its sharded "
        f"optimizer states; resume it with --trainer.strategy {STRATEGY_CONFIG} (validate, "
        "test, extrapolate and export read it under any strategy)"
    )


def _storage_failure(err: BaseException, path: Path) -> StorageError | None:
    """The storage error behind a failed save (its chain, a process failure, a short zip)."""
    if (found := storage_failure(err, path)) is not None:
        return found
    for cause in error_chain(err):
        if isinstance(cause, OSError):
            return storage_error(path, cause)
        for failure in (getattr(cause, "failures", None) or {}).values():  # CheckpointException
            found = _storage_failure(failure[0] if isinstance(failure, tuple) else failure, path)
            if found is not None:
                return found
    return None


def _optimizer_state_by_name(
    state: dict[str, Any], optimizer: torch.optim.Optimizer, module: torch.nn.Module, path: Any
) -> dict[str, Any]:
    """A plain optimizer state dict keyed by parameter names, in this optimizer's groups."""
    names = {param: name for name, param in module.named_parameters()}
    saved, groups = state.get("param_groups") or [], optimizer.param_groups
    if [len(g["params"]) for g in saved] != [len(g["params"]) for g in groups]:
        raise CheckpointError(
            f"ckpt_path={str(path)!r}: its optimizer's parameter groups hold "
            f"{[len(g['params']) for g in saved]} parameters, this model's "
            f"{[len(g['params']) for g in groups]}: its optimizer states cannot be restored"
        )
    ids = {
        pid: names[param]
        for old, new in zip(saved, groups, strict=True)
        for pid, param in zip(old["params"], new["params"], strict=True)
    }
    return {
        "state": {ids[pid]: value for pid, value in state["state"].items()},
        "param_groups": [{**g, "params": [ids[pid] for pid in g["params"]]} for g in saved],
    }


class FSDP2Strategy(ModelParallelStrategy):
    """FSDP2 over every process (tensor-parallel size 1), checkpoints saved atomically.

    Args:
        data_parallel_size: processes that shard the model ("auto": all of them).
        tensor_parallel_size: must be 1 (the network has no tensor-parallel plan).
        save_distributed_checkpoint: True: a folder of every process's shard; False: one file
            gathered by process 0 (its memory must hold it).
        process_group_backend: "nccl", "gloo"... (default: the device's).
        timeout: how long a collective waits.
    """

    def __init__(
        self,
        data_parallel_size: Literal["auto"] | int = "auto",
        tensor_parallel_size: int = 1,
        save_distributed_checkpoint: bool = True,
        process_group_backend: str | None = None,
        timeout: timedelta | None = default_pg_timeout,
    ) -> None:
        if tensor_parallel_size != 1:
            raise ConfigError(
                f"trainer.strategy.init_args.tensor_parallel_size={tensor_parallel_size!r}: "
                "must be 1 (the network shards over data-parallel processes only, FSDP2)"
            )
        if data_parallel_size != "auto" and (
            isinstance(data_parallel_size, bool)
            or not isinstance(data_parallel_size, int)
            or data_parallel_size < 1
        ):
            raise ConfigError(
                f"trainer.strategy.init_args.data_parallel_size={data_parallel_size!r}: must be "
                "'auto' (every process) or the number of processes"
            )
        super().__init__(
            data_parallel_size=data_parallel_size,
            tensor_parallel_size=tensor_parallel_size,
            save_distributed_checkpoint=save_distributed_checkpoint,
            process_group_backend=process_group_backend,
            timeout=timeout,
        )

    def setup_environment(self) -> None:
        if self._data_parallel_size == "auto":
            self._data_parallel_size = self.num_nodes * self.num_processes
        super().setup_environment()

    def save_checkpoint(
        self, checkpoint: dict[str, Any], filepath: Any, storage_options: Any = None
    ) -> None:
        if not self._save_distributed_checkpoint or storage_options is not None:
            return super().save_checkpoint(checkpoint, filepath, storage_options)
        path = Path(self.broadcast(str(filepath)))
        folder, failure = None, None
        if self.is_global_zero:
            try:
                folder = AtomicFolder(path)
            except StorageError as err:  # every process stops, none waits for the others
                failure = err
        failure, temporary = self.broadcast((failure, str(folder.temporary) if folder else None))
        if failure is not None:
            raise failure
        temporary = Path(temporary)
        try:
            record, failure, problem = None, None, None
            try:
                super().save_checkpoint(checkpoint, temporary)  # the shards, then meta.pt
                names = sorted(p.name for p in temporary.glob(f"__{self.global_rank}_*"))
                record = file_checksums(temporary, names)
            except (Exception, CheckpointException) as err:
                failure = err  # the others must hear of it: they would wait for this one
                problem = _storage_failure(err, path) or f"{type(err).__name__}: {err}"
            records = [None] * self.world_size
            dist.all_gather_object(records, (record, problem))
            if failure is not None:
                if isinstance(problem, StorageError):
                    raise problem from None
                raise failure
            for rank, (_, found) in enumerate(records):
                if isinstance(found, StorageError):
                    raise found
                if found is not None:
                    raise CheckpointError(f"cannot save {str(path)!r}: process {rank}: {found}")
            committed = None
            if folder is not None:
                try:
                    files = {k: v for r, _ in records for k, v in r.items()}
                    files.update(file_checksums(temporary, [".metadata", "meta.pt"]))
                    write_text(temporary / CHECKSUMS, json.dumps({"files": files}, indent=1))
                    folder.commit()
                except StorageError as err:  # every process stops, none waits for this one
                    committed = err
            committed = self.broadcast(committed)
            if committed is not None:
                raise committed
        except BaseException:
            if folder is not None:
                folder.abort()
            raise

    def load_checkpoint(self, checkpoint_path: Any, weights_only: bool | None = None) -> dict:
        # process 0 verifies every shard once; every process learns the verdict
        problem = None
        if self.is_global_zero:
            try:
                verify_checkpoint(checkpoint_path)
            except CheckpointError as err:
                problem = str(err)
        problem = self.broadcast(problem)
        if problem is not None:
            raise CheckpointError(problem)
        if is_sharded_checkpoint(checkpoint_path):
            return super().load_checkpoint(checkpoint_path, weights_only=weights_only)
        return self._load_full_checkpoint(Path(checkpoint_path), weights_only)

    def _load_full_checkpoint(self, path: Path, weights_only: bool | None) -> dict[str, Any]:
        """A single-file checkpoint into the sharded model and optimizer, each rank its shard."""
        checkpoint = torch.load(path, mmap=True, map_location="cpu", weights_only=weights_only)
        module = self.lightning_module
        options = StateDictOptions(
            full_state_dict=True, broadcast_from_rank0=True, strict=module.strict_loading
        )
        states = checkpoint.pop("optimizer_states", None)
        if self.optimizers and not states:
            raise CheckpointError(
                f"ckpt_path={str(path)!r} holds the weights only (no optimizer states): a fit "
                "cannot resume from it"
            )
        set_model_state_dict(module, checkpoint.pop("state_dict"), options=options)
        for optimizer, state in zip(self.optimizers, states or [], strict=False):
            by_name = _optimizer_state_by_name(state, optimizer, module, path)
            set_optimizer_state_dict(module, optimizer, by_name, options=options)
        return checkpoint
