"""FSDP2 training: Lightning's ModelParallelStrategy over every process, with checkpoint
folders that are written atomically and verified when read.

``configs/strategy/fsdp2.yaml`` selects it (``--trainer.strategy``): the LightningModule's
``configure_model`` shards the network (:mod:`lit_sparse.sharding`), and each checkpoint is
a folder of shards (:mod:`lit_sparse.runs.checkpoint_folders`). Lightning writes that
folder in place, so a kill during a save would leave a mix of two steps' shards under the
previous checkpoint's name; here it is written beside it, its files fsynced and recorded
(``crc32.json``), then swapped in whole (:class:`~lit_sparse.io.atomic.AtomicFolder`).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import torch.distributed as dist
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.pytorch.strategies import ModelParallelStrategy

from lit_sparse.errors import CheckpointError, ConfigError, StorageError
from lit_sparse.io.atomic import AtomicFolder, write_text
from lit_sparse.runs.checkpoint_folders import CHECKSUMS, file_checksums
from lit_sparse.runs.checkpoints import verify_checkpoint

__all__ = ["FSDP2Strategy"]


class FSDP2Strategy(ModelParallelStrategy):
    """FSDP2 over every process (Lightning's ModelParallelStrategy with data-parallel size
    the number of processes and tensor-parallel size 1), checkpoints saved atomically.

    Args:
        data_parallel_size: processes that shard the model ("auto": all of them).
        tensor_parallel_size: must be 1 (the network has no tensor-parallel plan).
        save_distributed_checkpoint: True: each checkpoint a folder of every process's shard;
            False: the whole weights and optimizer states gathered to one file by process 0
            (its memory must hold them).
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
            super().save_checkpoint(checkpoint, temporary)  # the shards, then meta.pt
            names = sorted(p.name for p in temporary.glob(f"__{self.global_rank}_*"))
            records = [None] * self.world_size
            dist.all_gather_object(records, file_checksums(temporary, names))
            if folder is not None:
                files = {k: v for r in records for k, v in r.items()}
                files.update(file_checksums(temporary, [".metadata", "meta.pt"]))
                write_text(temporary / CHECKSUMS, json.dumps({"files": files}, indent=1))
                folder.commit()
        except BaseException:
            if folder is not None:
                folder.abort()
            raise
        self.barrier("FSDP2Strategy.save_checkpoint")

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
        return super().load_checkpoint(checkpoint_path, weights_only=weights_only)
