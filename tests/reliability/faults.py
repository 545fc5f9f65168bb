"""Callbacks that inject faults into a real training run (tests only)."""

import errno
import os
import signal

import lightning.pytorch as pl
import torch


class KillBeforeBatch(pl.Callback):
    """Kill this process with SIGKILL just before micro-batch ``batch`` (0-based, whole run)."""

    def __init__(self, batch: int):
        self.batch = batch

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        seen = trainer.fit_loop.epoch_loop.batch_progress.total.ready - 1
        if seen == self.batch:
            os.kill(os.getpid(), signal.SIGKILL)


class PoisonWeightsAtStep(pl.Callback):
    """Fill the embedding with NaN before the first micro-batch of optimizer step ``step``."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            with torch.no_grad():
                pl_module.model.embedding.weight.fill_(float("nan"))


class KillAtTrainStart(pl.Callback):
    """SIGKILL when training starts: a resume dies in its own start-up (its config, lock and
    TensorBoard purge marker are in place, no step is trained)."""

    def on_train_start(self, trainer, pl_module):
        os.kill(os.getpid(), signal.SIGKILL)


class KillInExtrapolation(pl.Callback):
    """SIGKILL in the middle of the end-of-fit length extrapolation (after the final
    checkpoint, before extrapolation.json is written)."""

    def setup(self, trainer, pl_module, stage):
        from lit_sparse.callbacks import extrapolation

        def killed(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGKILL)

        extrapolation.evaluate_lengths = killed


class FullDisk(pl.Callback):
    """From the first micro-batch of optimizer step ``step`` on (None: from the end of
    training on, after the final checkpoint, before the result tables), every fsync fails
    with ENOSPC, as on a full disk: the next atomic write fails. ``on_exception`` gives the
    disk its space back (the test process goes on)."""

    def __init__(self, step: int | None = None):
        self.step = step
        self._fsync = None

    def _fill(self) -> None:
        if self._fsync is None:
            self._fsync = os.fsync

            def full(fd):
                raise OSError(errno.ENOSPC, "No space left on device")

            os.fsync = full

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            self._fill()

    def on_train_end(self, trainer, pl_module):
        if self.step is None:
            self._fill()

    def on_exception(self, trainer, pl_module, exception):
        if self._fsync is not None:
            os.fsync, self._fsync = self._fsync, None


class RaiseAtStep(pl.Callback):
    """Stop the process's training with an exception before optimizer step ``step`` (an
    in-process stand-in for a crash: the checkpoints before it stay)."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            raise Crash(f"crash before step {self.step}")


class Crash(RuntimeError):
    """The exception RaiseAtStep stops training with."""


class SleepAtTrainStart(pl.Callback):
    """Hold the run ``seconds`` when training starts (a run that trains a while)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def on_train_start(self, trainer, pl_module):
        import time

        time.sleep(self.seconds)


class WaitAtTrainStart(pl.Callback):
    """Hold the run when training starts until the file ``release`` exists (a long-running
    writer that the test lets go once it has seen what it waits for), at most ``timeout``
    seconds."""

    def __init__(self, release: str, timeout: float = 300.0):
        self.release, self.timeout = release, timeout

    def on_train_start(self, trainer, pl_module):
        import time
        from pathlib import Path

        deadline = time.monotonic() + self.timeout
        while not Path(self.release).exists() and time.monotonic() < deadline:
            time.sleep(0.05)


class CtrlCAtStep(pl.Callback):
    """Ctrl-C (a KeyboardInterrupt, as Python raises it on SIGINT) before optimizer step
    ``step``: Lightning's graceful stop of the trainer runs."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.step:
            raise KeyboardInterrupt


class CtrlCAtValidationStart(pl.Callback):
    """Ctrl-C when an evaluation (validate, extrapolate) starts."""

    def on_validation_start(self, trainer, pl_module):
        raise KeyboardInterrupt


class SegfaultIn(pl.Callback):
    """The process dies of SIGSEGV (as a native crash would) when its run's folder contains
    ``part`` (one run of a study crashes, the others not)."""

    def __init__(self, part: str):
        self.part = part

    def setup(self, trainer, pl_module, stage):
        if self.part in str(trainer.log_dir):
            os.kill(os.getpid(), signal.SIGSEGV)


class KillAfterShardsAtStep(pl.Callback):
    """Under FSDP2: SIGKILL every process when the checkpoint of optimizer step ``step`` has
    written its shards and not yet its ``meta.pt`` (a kill in the middle of a save)."""

    def __init__(self, step: int):
        self.step = step

    def setup(self, trainer, pl_module, stage):
        from lightning.pytorch.strategies import model_parallel

        save = model_parallel._distributed_checkpoint_save

        def killed(state, path):
            save(state, path)
            if trainer.global_step == self.step:
                os.kill(os.getpid(), signal.SIGKILL)

        model_parallel._distributed_checkpoint_save = killed


class KillInCheckpointSaveAtStep(pl.Callback):
    """SIGKILL half way through torch.save of a checkpoint file of optimizer step ``step``:
    the file named ``name`` ("last.ckpt"), or with ``name`` None the first of that step (the
    top-k one, written before last.ckpt). Half its bytes are written (to the atomic writer's
    temporary file, whichever file the save writes) when the process dies."""

    def __init__(self, step: int, name: str | None = "last.ckpt"):
        self.step, self.name = step, name

    def _aimed_at(self, target: str) -> bool:
        name = os.path.basename(target)
        if self.name is None:
            return name.endswith(".ckpt") or ".ckpt.tmp-" in name
        return name == self.name or name.startswith(f".{self.name}.tmp-")

    def setup(self, trainer, pl_module, stage):
        import io

        save = torch.save

        def killed(obj, f, *args, **kwargs):
            path = f if isinstance(f, (str, os.PathLike)) else None
            target = str(path) if path else os.readlink(f"/proc/self/fd/{f.fileno()}")
            if trainer.global_step != self.step or not self._aimed_at(target):
                return save(obj, f, *args, **kwargs)
            buffer = io.BytesIO()
            save(obj, buffer, *args, **kwargs)
            half = buffer.getvalue()[: buffer.tell() // 2]
            handle = open(path, "wb") if path else f  # left open: the process dies
            handle.write(half)
            handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        torch.save = killed


class FullDiskInShardedSave(pl.Callback):
    """Under FSDP2: the checkpoint of optimizer step ``step`` finds the disk full on process
    ``rank``, in ``part``: "meta.pt" (torch.save's zip writer stops short and raises the
    RuntimeError it gives on a full disk) or "shards" (a shard's write raises ENOSPC)."""

    ZIP_WRITER = "[enforce fail at inline_container.cc:672] unexpected pos 704 vs 598"

    def __init__(self, step: int, part: str = "meta.pt", rank: int = 0):
        self.step, self.part, self.rank = step, part, rank

    def setup(self, trainer, pl_module, stage):
        if trainer.global_rank != self.rank:
            return
        if self.part == "meta.pt":
            save = torch.save

            def full(obj, f, *args, **kwargs):
                if str(f).endswith("meta.pt") and trainer.global_step == self.step:
                    raise RuntimeError(self.ZIP_WRITER)
                return save(obj, f, *args, **kwargs)

            torch.save = full
            return
        from torch.distributed.checkpoint import filesystem

        write = filesystem._write_item

        def full_shard(*args, **kwargs):
            if trainer.global_step == self.step:
                raise OSError(errno.ENOSPC, "No space left on device")
            return write(*args, **kwargs)

        filesystem._write_item = full_shard
