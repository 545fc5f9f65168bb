"""The run folder a Lightning command writes, chosen before anything is built (DDP: rank 0's)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonargparse import Namespace
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.loggers import TensorBoardLogger

from lit_sparse.attention.registry import ATTENTION
from lit_sparse.errors import CheckpointError, ConfigError
from lit_sparse.io.atomic import remove_stale_temporaries, write_text
from lit_sparse.runs import folders
from lit_sparse.runs.checkpoint_files import is_checkpoint, read_checkpoint
from lit_sparse.runs.events import wait_for_a_later_event_file, writer_file
from lit_sparse.runs.locks import RunLock, is_global_rank_zero
from lit_sparse.runs.resume import choose_run

RUN_HANDOFF = "LIT_SPARSE_RUN"
"""Environment variable handing a DDP job's launched processes rank 0's run choices."""

_NAMED_CHECKPOINTS = ("last", "best", "hpc", "registry")


class RunConfigCallback(SaveConfigCallback):
    """Saves the command's config in its log folder (rank 0, atomically, never replacing a file); a
    resume that fails before training a step removes the config and event file it added."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._written: Path | None = None
        self._start_step: int | None = None
        self._ended = False

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.already_saved:
            return
        log_dir = trainer.log_dir  # a broadcast: every process asks
        if trainer.is_global_zero and self.save_to_log_dir and log_dir is not None:
            path = Path(log_dir) / self.config_filename
            if path.exists() and not self.overwrite:
                raise ConfigError(
                    f"{path} exists: this log folder holds another run's config; choose "
                    "another trainer.logger version (null: the next free one)"
                )
            write_text(path, self.parser.dump(self.config, skip_none=False))
            self._written = path
        if trainer.is_global_zero:
            self.save_config(trainer, pl_module, stage)
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._start_step = trainer.global_step

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._ended = True

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception) -> None:
        written = self._written
        if (
            written is None
            or not folders.RESUME_CONFIG.match(written.name)
            or self._ended
            or (self._start_step is not None and trainer.global_step != self._start_step)
        ):
            return
        self._written = None
        for path in filter(None, (written, _event_file(trainer))):
            with contextlib.suppress(OSError):
                path.unlink()


def _event_file(trainer: Trainer) -> Path | None:
    """The TensorBoard event file this process wrote in the run (closed first), if any."""
    logger = trainer.logger
    if not isinstance(logger, TensorBoardLogger) or getattr(logger, "_experiment", None) is None:
        return None
    name = writer_file(logger)
    logger.experiment.close()
    return Path(name) if name else None


def tensorboard_logger(config: Namespace) -> Namespace | None:
    """The command's TensorBoardLogger group, if that is its logger."""
    logger = config.trainer.get("logger")
    if isinstance(logger, Namespace) and logger.class_path.endswith("TensorBoardLogger"):
        return logger
    return None


def attention_run_name(class_path: str) -> str:
    """The registry name of an attention class path (else the class's name)."""
    for name, cls in ATTENTION.load().items():
        if f"{cls.__module__}.{cls.__qualname__}" == class_path:
            return name
    return class_path.rpartition(".")[2]


def name_run_by_attention(config: Namespace, args: list[str]) -> None:
    """Log a fit whose command line changes the attention (``--model.attention geometric`` on
    configs/sliding_window.yaml) under that attention's name, not the config file's run name
    (a config names its run after its own attention), unless the command line names the run."""
    flags = [arg.partition("=")[0] for arg in args if arg.startswith("--")]
    changed = {"--model.attention", "--model.attention.class_path"} & set(flags)
    logger = tensorboard_logger(config)
    if not changed or logger is None or any(f.startswith("--trainer.logger") for f in flags):
        return
    attention = config.get("model", Namespace()).get("attention")
    class_path = getattr(attention, "class_path", None)
    if isinstance(class_path, str):
        logger.init_args.name = attention_run_name(class_path)


def without_hp_metric(config: Namespace) -> None:
    """Turn off TensorBoardLogger's ``hp_metric`` placeholder chart (-1, never updated)."""
    if (logger := tensorboard_logger(config)) is not None:
        logger.init_args.default_hp_metric = False


def _pin_version(logger: Namespace, version: Any, purge_step: int | None) -> None:
    logger.init_args.version = version
    logger.dict_kwargs = {**(logger.get("dict_kwargs") or {}), "purge_step": purge_step}


def continue_run(
    config: Namespace, save_config_kwargs: dict[str, Any], dump: Callable[[], dict]
) -> None:
    """``fit --ckpt_path last|RUN_DIR|PATH``: resume in the checkpoint's own run ("last": the run
    this config started, :func:`choose_run`), locked, a killed save's temporaries removed, the
    logger pinned to it with later events purged, the config ``config.resume-<step>.yaml``."""
    handoff = os.environ.get(RUN_HANDOFF)
    first = is_global_rank_zero()
    logger = tensorboard_logger(config)
    if not first and handoff:  # a process launched by the first one: reuse its choice
        chosen = json.loads(handoff)
        config.ckpt_path = chosen["ckpt_path"]
        if logger is not None and chosen.get("version") is not None:
            _pin_version(logger, chosen["version"], chosen.get("purge_step"))
        save_config_kwargs["config_filename"] = chosen["config_filename"]
        return
    experiment = Path(logger.init_args.save_dir) / (logger.init_args.name or "") if logger else None
    ckpt_path = config.get("ckpt_path")
    if ckpt_path == "last" and experiment is not None:
        found = choose_run(experiment, dump(), use_locks=first)
        config.ckpt_path = None if found is None else str(found)
    elif ckpt_path and Path(ckpt_path).is_dir() and not is_checkpoint(ckpt_path):  # a run
        if (found := folders.run_checkpoint(ckpt_path)) is None:
            raise CheckpointError(
                f"ckpt_path={ckpt_path!r}: no checkpoint in {Path(ckpt_path) / 'checkpoints'}"
            )
        config.ckpt_path = str(found)
    if not config.ckpt_path or config.ckpt_path in _NAMED_CHECKPOINTS:
        return
    path = Path(config.ckpt_path)
    checkpoint = read_checkpoint(path, weights=False)  # verified: a damaged one is refused
    step = int(checkpoint.get("global_step", 0))
    run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
    filename = f"config.resume-{step}.yaml"
    own_run = logger is not None and run_dir is not None
    if own_run and run_dir.parent.resolve() == experiment.resolve():
        if first:
            RunLock.acquire(run_dir, "fit")
            for folder in (run_dir, run_dir / "checkpoints"):
                remove_stale_temporaries(folder, idle_s=0)  # we hold the run's lock
            wait_for_a_later_event_file(run_dir)  # TensorBoard reads files in name order
        # a checkpoint of a finished run (saved at its schedule's end): keep its events at
        # that step (validation, extrapolation), none after it exist
        hparams = checkpoint.get("hyper_parameters") or {}
        finished = hparams.get("max_steps") is not None and step >= hparams["max_steps"]
        _pin_version(logger, run_dir.name, step + 1 if finished else step)
        filename = folders.resume_config_name(run_dir, step)
    save_config_kwargs["config_filename"] = filename


def evaluation_log_dir(config: Namespace, subcommand: str) -> str | None:
    """Point an evaluation's logger at ``<run>/evals``; its stem ``<command>-step<k>``, or None."""
    logger = tensorboard_logger(config)
    if logger is None:
        return None
    base = Path(logger.init_args.save_dir) / (logger.init_args.name or "")
    ckpt_path, step = config.get("ckpt_path"), None
    if ckpt_path and is_checkpoint(ckpt_path):
        step = read_checkpoint(ckpt_path, weights=False).get("global_step")
        if Path(ckpt_path).parent.name == "checkpoints":
            base = Path(ckpt_path).parent.parent
    logger.init_args.save_dir, logger.init_args.name = str(base), "evals"
    logger.init_args.version = None  # a run's resume config pins its own version...
    kwargs = logger.get("dict_kwargs") or {}  # ... and a purge that would hide its events
    logger.dict_kwargs = {key: value for key, value in kwargs.items() if key != "purge_step"}
    return subcommand if step is None else f"{subcommand}-step{step}"


def claim_log_dir(
    trainer: Trainer, subcommand: str, ckpt_path: str | None, stem: str | None, config_filename: str
) -> None:
    """Create (rank 0) the log folder, ``version_N`` or ``evals/<stem>[-N]``, and lock a fit's."""
    logger = trainer.logger
    if not isinstance(logger, TensorBoardLogger):
        return
    if not is_global_rank_zero():
        handoff = json.loads(os.environ.get(RUN_HANDOFF) or "{}")
        if handoff.get("version") is not None:
            logger._version = handoff["version"]
        return
    if subcommand != "fit" and stem is not None:
        names = itertools.chain([stem], (f"{stem}-{n}" for n in itertools.count(2)))
        logger._version = folders.allocate_folder(Path(logger.root_dir), names).name
    elif subcommand == "fit" and logger._version is None:
        logger._version, folder = folders.new_version(logger.root_dir)
        RunLock.acquire(folder, "fit")
    elif subcommand == "fit":
        folder = Path(logger.log_dir)
        if ckpt_path is None and (folder / "config.yaml").exists():
            raise ConfigError(
                f"trainer.logger.init_args.version={logger.version!r}: {folder} already holds "
                f"a run; resume it with --ckpt_path {folder}, or leave the version unset for a "
                "new run"
            )
        RunLock.acquire(folder, "fit")
    purge_step = (getattr(logger, "_kwargs", None) or {}).get("purge_step")
    chosen = {"version": logger.version, "ckpt_path": ckpt_path, "purge_step": purge_step}
    os.environ[RUN_HANDOFF] = json.dumps({**chosen, "config_filename": config_filename})
