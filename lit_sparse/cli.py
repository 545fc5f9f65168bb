"""LightningCLI for lit_sparse: the module, the data, argument links, friendly failures."""

from __future__ import annotations

import importlib
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from argparse import SUPPRESS
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from jsonargparse import Namespace, set_parsing_settings
from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.loops.fit_loop import _FitLoop

from lit_sparse.callbacks import LengthExtrapolation

from .atomic_files import remove_stale_temporaries, storage_failure, write_text
from .attention import build_attention
from .checkpoints import (
    FinalCheckpoint,
    check_tokenizer,
    checkpoint_tokenizer,
    differences,
    read_checkpoint,
)
from .config import ModelConfig
from .config_files import (
    check_config_files,
    check_trainer_options,
    checked_seq_len,
    expand_attention_names,
)
from .data import DataSourceUnavailable, TextDataModule
from .errors import CheckpointError, ConfigError, find_user_error
from .evaluation import ExtrapolationResult
from .list_options import join_list_values, list_options
from .module import LitLanguageModel
from .resume import changed_values, choose_run, describe_changes
from .resumed_validation import ResumedValidation
from .runs import (
    RunLock,
    allocate_folder,
    is_global_rank_zero,
    new_version,
    release_all,
    resume_config_name,
    run_checkpoint,
)

# field docstrings (ModelConfig, SourceConfig) become --help text
set_parsing_settings(docstring_parse_attribute_docstrings=True)

TRAINER_DEFAULTS = {
    "logger": {
        "class_path": "lightning.pytorch.loggers.TensorBoardLogger",
        "init_args": {"save_dir": "runs", "name": "lit_sparse"},
    },
    "plugins": [{"class_path": "lit_sparse.checkpoints.AtomicCheckpointIO"}],
}


def condense_parse_error(message: str) -> str:
    """One line from jsonargparse's report: the key and the reasons our code gave.

    A failing subclass or Optional value produces a nested report (usage, "Does not
    validate against any of the Union subtypes", the NoneType alternative, the given
    value); the reasons are the indented "- ..." lines.
    """
    link = re.search(r"Call to compute_fn of link .* failed: (.*)", message, re.DOTALL)
    if link:  # an argument link (seq_len, vocabulary) rejected its source value
        return " ".join(link.group(1).split())
    keys = re.findall(r'Parser key "([^"]+)":\s*\n\s*(.+)', message)
    reasons = []
    lines = message.splitlines()
    for i, line in enumerate(lines):
        item = line.strip()
        if not item.startswith("- ") or "NoneType" in item or item.startswith("- Parser key"):
            continue
        if not item.endswith(":"):
            reasons.append(item[2:])
            continue
        # a heading over a nested report: keep its plain lines (jsonargparse's own reason,
        # e.g. "Option 'n_random' is not accepted" under the plugin's class_path)
        indent = len(line) - len(line.lstrip())
        nested = []
        for below in lines[i + 1 :]:
            if not below.strip() or len(below) - len(below.lstrip()) <= indent:
                break
            if below.strip().startswith(("- ", "Parser key")):
                break
            nested.append(below.strip())
        if nested:
            heading = re.fullmatch(r"- Problem with given class_path '([^']+)':", item)
            where = f"{heading.group(1)}: " if heading else f"{item[2:]} "
            reasons.append(where + " ".join(nested))
    if keys and reasons:
        return f"{keys[0][0]}: {'; '.join(dict.fromkeys(reasons))}"
    if keys:  # nested reports only (a subclass's own argument): the innermost key's reason
        (outer, _), (inner, reason) = keys[0], keys[-1]
        key = outer if inner == outer else f"{outer}...{inner}"
        return f"{key}: {reason.strip()}"
    return " ".join(message.split())


class LitSparseArgumentParser(LightningArgumentParser):
    """Prints a failed parse as one line (``error: <key>: <reason>``), usage on --help;
    list options take space-separated values (``--lengths 1024 2048 4096``)."""

    def parse_args(self, args=None, namespace=None, **kwargs):
        if args is not None and not isinstance(args, (dict, Namespace)):
            args = join_list_values(args, list_options(self))
        return super().parse_args(args, namespace, **kwargs)

    def error(self, message: str, ex: Exception | None = None):
        if not self.exit_on_error:  # a programmatic parse wants the exception
            return super().error(message, ex)
        print(
            f"error: {condense_parse_error(message)}  (--help lists the options)", file=sys.stderr
        )
        raise SystemExit(2)


OPTIMIZER_OPTIONS = ("optimizer", "lr_scheduler")


def refuse_optimizer_option(where: str) -> None:
    """LightningCLI's ``--optimizer`` / ``--lr_scheduler`` would replace the module's AdamW
    and its warmup + cosine schedule: ConfigError pointing at the module's options."""
    raise ConfigError(
        f"{where}: not supported; lit_sparse trains with its own AdamW and warmup + cosine "
        "schedule, set by --model.lr, --model.min_lr_ratio, --model.warmup_steps, "
        "--model.weight_decay, --model.betas, --model.eps and --model.optimizer "
        "(adamw | adamw8bit)"
    )


def check_optimizer_args(args: Sequence[str]) -> None:
    """Refuse ``--optimizer ...`` / ``--lr_scheduler ...`` in any form on a command line."""
    for arg in args:
        key = arg[2:].partition("=")[0].split(".")[0] if arg.startswith("--") else None
        if key in OPTIMIZER_OPTIONS:
            refuse_optimizer_option(f"--{key}")


def data_vocab_size(data: Namespace) -> int:
    """The model vocabulary the data config implies, known before anything is built.

    A DataModule class provides ``model_vocab_size(**init_args)``; for text data it loads the
    tokenizer (a local file unless the config names a hub tokenizer).
    """
    module, _, name = data.class_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    init_args = data.get("init_args") or Namespace()
    try:
        return cls.model_vocab_size(**init_args.as_dict())
    except DataSourceUnavailable as err:  # jsonargparse would bury it under usage text
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


class _CompletingFitLoop(_FitLoop):
    """Lightning's fit loop, except that a run resumed at its final step runs the end-of-fit
    hooks (``on_train_end``: the final checkpoint, the length extrapolation...) instead of
    returning at once, so work a kill or a full disk interrupted there is completed."""

    def run(self) -> None:
        self.setup_data()
        trainer = self.trainer
        if (
            self.skip
            and trainer.ckpt_path is not None
            and 0 < self.max_steps <= self.epoch_loop.global_step
        ):
            bar = trainer.progress_bar_callback
            if bar is not None:  # its on_train_end closes the bar on_train_start opens
                bar.on_train_start(trainer, trainer.lightning_module)
            self.on_run_end()
            return
        super().run()


class LitSparseTrainer(Trainer):
    """Lightning's Trainer with one more command, ``extrapolate``, and a fit loop that
    finishes a resumed run's end-of-fit work."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        loop = _CompletingFitLoop(
            self, min_epochs=self.fit_loop.min_epochs, max_epochs=self.fit_loop.max_epochs
        )
        loop.epoch_loop = self.fit_loop.epoch_loop
        self.fit_loop = loop

    def extrapolate(
        self,
        model: LightningModule | None = None,
        datamodule: LightningDataModule | None = None,
        ckpt_path: str | None = None,
        lengths: list[int] | None = None,
        multiples: list[float] | None = None,
        new_offsets: Literal["use", "drop"] | None = None,
        batch_size: int | None = None,
        weights_only: bool | None = None,
    ) -> ExtrapolationResult | None:
        """Perplexity of a checkpoint at several evaluation lengths on every held-out set.

        Runs ``validate`` on the checkpoint's weights (every process its share of the
        windows), then scores each held-out set at each length, prints the table and writes
        it as extrapolation.json / extrapolation.md in the run directory.

        Args:
            model: the LightningModule (from the config; the checkpoint's hyperparameters
                override it).
            datamodule: the data (its held-out sets and windows).
            ckpt_path: the checkpoint whose weights are evaluated.
            lengths: evaluation lengths (default: ``multiples`` of the training length).
            multiples: multiples of the training length (default 1, 2, 4).
            new_offsets: "use" or "drop" distances that appear only beyond the training
                length (FibonacciAttention); default: as trained.
            batch_size: windows per batch (default: about the validation batch's tokens).
            weights_only: how the checkpoint is loaded (as ``validate``; a run's saved
                config.yaml carries fit's value).
        """
        callback = LengthExtrapolation(
            multiples=multiples,
            lengths=lengths,
            new_offsets=new_offsets,
            batch_size=batch_size,
            stages=["validate"],
            print_table=True,
        )
        self.callbacks.append(callback)
        try:
            self.validate(
                model,
                datamodule=datamodule,
                ckpt_path=ckpt_path,
                verbose=False,
                weights_only=weights_only,
            )
        finally:
            self.callbacks.remove(callback)
        return callback.result


RUN_HANDOFF = "LIT_SPARSE_RUN"
"""Environment variable through which the first process of a DDP job tells the processes
it launches (they run this command again) which checkpoint, log folder and config name it
chose, so they do not choose again."""


class RunConfigCallback(SaveConfigCallback):
    """Saves the command's config in its log folder (rank 0) with the atomic writer: a full
    disk or a read-only folder is one line, and an existing config file is never replaced
    (a resume's name is chosen free by the CLI)."""

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
        if trainer.is_global_zero:
            self.save_config(trainer, pl_module, stage)
            self.already_saved = True
        self.already_saved = trainer.strategy.broadcast(self.already_saved)


class LitSparseCLI(LightningCLI):
    """``python -m lit_sparse fit|validate|test|extrapolate --config ...``."""

    def __init__(self, args: Sequence[str] | None = None, **kwargs):
        kwargs.setdefault("trainer_defaults", TRAINER_DEFAULTS)
        kwargs.setdefault("save_config_callback", RunConfigCallback)
        kwargs.setdefault("datamodule_class", LightningDataModule)
        kwargs.setdefault("subclass_mode_data", True)
        kwargs.setdefault("parser_kwargs", {"default_env": False})
        kwargs.setdefault("trainer_class", LitSparseTrainer)
        kwargs.setdefault("parser_class", LitSparseArgumentParser)
        # the module configures its optimizer and schedule (model.lr, model.optimizer, ...)
        kwargs.setdefault("auto_configure_optimizers", False)
        args = expand_attention_names(sys.argv[1:] if args is None else args)
        check_config_files(args)
        check_optimizer_args(args)
        self.scratch_dir: Path | None = None  # fast_dev_run's files, removed at the end
        try:
            with warnings.catch_warnings():  # args came from sys.argv: not a mistake here
                warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
                super().__init__(LitLanguageModel, args=args, **kwargs)
        finally:
            if self.scratch_dir is not None:
                shutil.rmtree(self.scratch_dir, ignore_errors=True)

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """fit, validate, test (the held-out sets, as validate) and extrapolate; Lightning's
        predict is left out (text generation is its own command)."""
        commands = {k: v for k, v in LightningCLI.subcommands().items() if k != "predict"}
        return {**commands, "extrapolate": {"model", "datamodule"}}

    def before_instantiate_classes(self) -> None:
        """A config's ``optimizer`` / ``lr_scheduler`` value is refused.

        ``--trainer.fast_dev_run``: every file the run would write (checkpoints, the
        callbacks' JSON) goes to a temporary folder, removed when the command ends."""
        subcommand = self.config.get("subcommand")
        config = self.config[subcommand] if subcommand else self.config
        for key in OPTIMIZER_OPTIONS:
            value = config.get(key)
            if value is not None:
                shown = value.get("class_path", value) if isinstance(value, Namespace) else value
                refuse_optimizer_option(f"{key}: {shown} (in a config file)")
        trainer = config.trainer
        if trainer.get("fast_dev_run"):
            self.scratch_dir = Path(tempfile.mkdtemp(prefix="lit_sparse-fast_dev_run-"))
            trainer.default_root_dir = str(self.scratch_dir)

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        if self.scratch_dir is not None:  # a checkpoint folder named in the config, too
            for callback in self.trainer.checkpoint_callbacks:
                callback.dirpath = str(self.scratch_dir / "checkpoints")

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        # the keys LightningCLI's automatic optimizer options leave in saved configs
        # ("optimizer: null"), so earlier runs' config.yaml still load; a value is refused
        for key in OPTIMIZER_OPTIONS:
            parser.add_argument(f"--{key}", type=Any, default=None, help=SUPPRESS)
        parser.link_arguments(
            "data.init_args.seq_len", "model.arch.context_length", compute_fn=checked_seq_len
        )
        parser.link_arguments("data", "model.arch.vocab_size", compute_fn=data_vocab_size)
        parser.link_arguments("trainer.max_steps", "model.max_steps")

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        super().parse_arguments(parser, args)
        subcommand = self.config.get("subcommand")
        if subcommand is None:
            return
        check_trainer_options(self.config[subcommand].trainer, subcommand)
        if subcommand == "fit":
            self._continue_run(self.config.fit)
        else:
            self._evaluation_log_dir(self.config[subcommand], subcommand)

    # ------------------------------------------------------------ runs and resume
    @staticmethod
    def _tensorboard(config: Namespace) -> Namespace | None:
        logger = config.trainer.get("logger")
        if isinstance(logger, Namespace) and logger.class_path.endswith("TensorBoardLogger"):
            return logger
        return None

    def _continue_run(self, config: Namespace) -> None:
        """``fit --ckpt_path last|RUN_DIR|PATH``: resume in the checkpoint's own run.

        "last" is the run this command started (:func:`lit_sparse.resume.choose_run`); a run
        folder means its checkpoints/last.ckpt. The run is locked (a second process gets one
        line naming the holder), stale temporary files of a killed save are removed, the
        logger's version is pinned to the run and its events after the checkpoint's step are
        purged (nothing at the final step of a finished run, which is completed, not
        retrained), and the config of the resumed part is saved beside the original as
        ``config.resume-<step>.yaml`` (``-2``, ``-3``... after further crashes).
        """
        handoff = os.environ.get(RUN_HANDOFF)
        first = is_global_rank_zero()
        logger = self._tensorboard(config)
        if not first and handoff:  # a process launched by the first one: reuse its choice
            chosen = json.loads(handoff)
            config.ckpt_path = chosen["ckpt_path"]
            if logger is not None and chosen.get("version") is not None:
                logger.init_args.version = chosen["version"]
                logger.dict_kwargs = {
                    **(logger.get("dict_kwargs") or {}),
                    "purge_step": chosen.get("purge_step"),
                }
            self.save_config_kwargs["config_filename"] = chosen["config_filename"]
            return
        experiment = (
            Path(logger.init_args.save_dir) / (logger.init_args.name or "") if logger else None
        )
        ckpt_path = config.get("ckpt_path")
        if ckpt_path == "last" and experiment is not None:
            found = choose_run(experiment, self._dump(config, "fit"), use_locks=first)
            config.ckpt_path = None if found is None else str(found)
        elif ckpt_path and Path(ckpt_path).is_dir():
            found = run_checkpoint(ckpt_path)
            if found is None:
                raise CheckpointError(
                    f"ckpt_path={ckpt_path!r}: no checkpoint in {Path(ckpt_path) / 'checkpoints'}"
                )
            config.ckpt_path = str(found)
        if not config.ckpt_path or config.ckpt_path in ("last", "best", "hpc", "registry"):
            return
        path = Path(config.ckpt_path)
        checkpoint = read_checkpoint(path)  # verified: a damaged file is refused here
        step = int(checkpoint.get("global_step", 0))
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
        filename = f"config.resume-{step}.yaml"
        if (
            logger is not None
            and run_dir is not None
            and run_dir.parent.resolve() == experiment.resolve()
        ):
            if first:
                RunLock.acquire(run_dir, "fit")
                for folder in (run_dir, run_dir / "checkpoints"):
                    remove_stale_temporaries(folder, idle_s=0)  # we hold the run's lock
            # a checkpoint of a finished run (saved at its schedule's end): keep its events
            # at that step (validation, extrapolation), none after it exist
            hparams = checkpoint.get("hyper_parameters") or {}
            finished = hparams.get("max_steps") is not None and step >= hparams["max_steps"]
            logger.init_args.version = run_dir.name
            logger.dict_kwargs = {
                **(logger.get("dict_kwargs") or {}),
                "purge_step": step + 1 if finished else step,
            }
            filename = resume_config_name(run_dir, step)
        self.save_config_kwargs["config_filename"] = filename

    def _dump(self, config: Namespace, subcommand: str) -> dict:
        """A subcommand's config as its saved config.yaml holds it."""
        return yaml.safe_load(self._parser(subcommand).dump(config, skip_none=False)) or {}

    def _evaluation_log_dir(self, config: Namespace, subcommand: str) -> None:
        """validate/test/predict/extrapolate log under ``<run>/evals/<command>-step<k>`` (the
        evaluated run's folder; the experiment's when the checkpoint is not in a run), never
        in a ``version_N`` of their own that would look like a training run."""
        logger = self._tensorboard(config)
        if logger is None:
            return
        base = Path(logger.init_args.save_dir) / (logger.init_args.name or "")
        ckpt_path, step = config.get("ckpt_path"), None
        if ckpt_path and Path(ckpt_path).is_file():
            step = read_checkpoint(ckpt_path).get("global_step")
            if Path(ckpt_path).parent.name == "checkpoints":
                base = Path(ckpt_path).parent.parent
        logger.init_args.save_dir, logger.init_args.name = str(base), "evals"
        logger.init_args.version = None  # a run's resume config pins its own version...
        kwargs = dict(logger.get("dict_kwargs") or {})
        kwargs.pop("purge_step", None)  # ... and a purge that would hide its events
        logger.dict_kwargs = kwargs
        self._log_stem = subcommand if step is None else f"{subcommand}-step{step}"

    def _claim_log_dir(self, subcommand: str) -> None:
        """Create this command's log folder atomically (a new ``version_N`` for a new run, the
        evaluation's folder under ``evals/``) and lock a run's, on the first process; the
        processes it launches take the same folder."""
        logger = self.trainer.logger
        if not isinstance(logger, TensorBoardLogger):
            return
        handoff = json.loads(os.environ.get(RUN_HANDOFF) or "{}")
        if not is_global_rank_zero():
            if handoff.get("version") is not None:
                logger._version = handoff["version"]
            return
        stem = getattr(self, "_log_stem", None)
        if subcommand != "fit" and stem is not None:
            names = itertools.chain([stem], (f"{stem}-{n}" for n in itertools.count(2)))
            logger._version = allocate_folder(Path(logger.root_dir), names).name
        elif subcommand == "fit" and logger._version is None:
            logger._version, folder = new_version(logger.root_dir)
            RunLock.acquire(folder, "fit")
        elif subcommand == "fit":
            folder = Path(logger.log_dir)
            if self.config.fit.get("ckpt_path") is None and (folder / "config.yaml").exists():
                raise ConfigError(
                    f"trainer.logger.init_args.version={logger.version!r}: {folder} already "
                    f"holds a run; resume it with --ckpt_path {folder}, or leave the version "
                    "unset for a new run"
                )
            RunLock.acquire(folder, "fit")
        os.environ[RUN_HANDOFF] = json.dumps(
            {
                "version": logger.version,
                "ckpt_path": self.config[subcommand].get("ckpt_path"),
                "purge_step": (getattr(logger, "_kwargs", None) or {}).get("purge_step"),
                "config_filename": self.save_config_kwargs.get("config_filename", "config.yaml"),
            }
        )

    def _check_callbacks(self) -> None:
        """Callbacks that cannot work with this data refuse now, before anything runs."""
        for callback in self.trainer.callbacks:
            check = getattr(callback, "check_data", None)
            if callable(check) and self.datamodule is not None:
                check(self.datamodule)

    def instantiate_trainer(self, **kwargs) -> Trainer:
        trainer = super().instantiate_trainer(**kwargs)
        trainer.callbacks.insert(0, FinalCheckpoint())  # its on_train_end runs first
        trainer.callbacks.append(ResumedValidation())
        return trainer

    def before_fit(self) -> None:
        self._check_callbacks()
        self._claim_log_dir("fit")

    def before_validate(self) -> None:
        self._check_callbacks()
        self._claim_log_dir("validate")

    def before_test(self) -> None:
        self._claim_log_dir("test")

    def before_predict(self) -> None:
        self._claim_log_dir("predict")

    def before_extrapolate(self) -> None:
        self._check_callbacks()
        self._claim_log_dir("extrapolate")

    def _parse_ckpt_path(self) -> None:
        """Check the checkpoint before anything is built: whole (every record's CRC), of the
        config's model (else one line naming what differs), of the config's tokenizer; for
        fit, print the optimizer and schedule values the resume changes.

        Lightning's own version of this step would replace the command's model values with
        the checkpoint's (silently ignoring e.g. a lower ``--model.lr`` on resume); here the
        command's values hold, and a different model is refused.
        """
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not ckpt_path or not Path(ckpt_path).is_file():
            return
        checkpoint = read_checkpoint(ckpt_path)
        found = checkpoint.get("hyper_parameters", {})
        wanted = self.config[subcommand].model
        lines = []
        if "arch" in found:
            lines += differences(
                _resolved_arch(wanted.arch.as_dict()), _resolved_arch(found["arch"]), "arch"
            )
        if "attention" in found:
            config_attention = build_attention(wanted.attention.as_dict())
            ckpt_attention = build_attention(found["attention"])
            if type(config_attention) is not type(ckpt_attention):
                lines.append(
                    f"attention: config {type(config_attention).name!r}, "
                    f"checkpoint {type(ckpt_attention).name!r}"
                )
            else:
                lines += differences(
                    config_attention.init_args(), ckpt_attention.init_args(), "attention"
                )
        if subcommand == "fit" and found.get("optimizer", "adamw") != wanted.get("optimizer"):
            lines.append(
                f"optimizer: config {wanted.get('optimizer')!r}, checkpoint "
                f"{found.get('optimizer', 'adamw')!r} (its state cannot carry over)"
            )
        if lines:
            raise CheckpointError(
                f"ckpt_path={ckpt_path!r} holds a different model than the config: "
                + "; ".join(f"model.{line}" for line in lines)
                + " (use the run's own config.yaml)"
            )
        data = self.config[subcommand].get("data")
        init_args = data.get("init_args") if isinstance(data, Namespace) else None
        if init_args is not None and init_args.get("tokenizer"):
            from .data.tokenizer import load_tokenizer

            spec = init_args.tokenizer
            trained = checkpoint_tokenizer(checkpoint)
            check_tokenizer(trained, load_tokenizer(spec).sha256, spec, ckpt_path)
        if subcommand == "fit" and is_global_rank_zero():
            changes = changed_values(wanted.as_dict(), found)
            if changes:
                print(
                    f"resuming from step {checkpoint.get('global_step')} with "
                    f"{describe_changes(changes)}; they apply from this step and the config "
                    f"of the resumed part records them "
                    f"({self.save_config_kwargs.get('config_filename')})",
                    file=sys.stderr,
                )

    def after_fit(self) -> None:
        """Print the end-of-run extrapolation table, where the logs went (naming the logger
        in use) and where the checkpoints are."""
        trainer = self.trainer
        log_dir = trainer.log_dir  # a collective under DDP: every process asks
        if not trainer.is_global_zero:
            return
        if trainer.fast_dev_run:
            print(
                f"fast_dev_run: {trainer.global_step} optimizer step(s) ran; nothing was kept "
                "(its files went to a temporary folder, now removed)"
            )
            return
        for callback in trainer.callbacks:  # a finished run resumed: the table it saved
            if isinstance(callback, LengthExtrapolation) and callback.result is not None:
                saved = f" ({callback.filename}.md)" if callback.filename else ""
                print(f"\nlength extrapolation{saved}:\n{callback.result.to_markdown()}")
        lines = [logs_hint(trainer, log_dir)]
        callback = trainer.checkpoint_callback
        if callback is not None and callback.dirpath:
            lines.append(f"checkpoints: {callback.dirpath}  (resume: fit ... --ckpt_path last)")
        print("\n".join(lines))


def logs_hint(trainer: Trainer, log_dir: str | None) -> str:
    """Where a run's logs went and how to look at them, for the logger in use."""
    if not trainer.loggers:
        return f"logs: none (no logger); files: {log_dir or trainer.default_root_dir}"
    hints = []
    for logger in trainer.loggers:
        name = type(logger).__name__
        if isinstance(logger, TensorBoardLogger):
            hints.append(
                f"logs: {logger.log_dir}  (tensorboard --logdir {Path(logger.log_dir).parent})"
            )
        elif isinstance(logger, CSVLogger):
            hints.append(f"logs: {logger.log_dir}  (CSVLogger: metrics.csv; figures in images/)")
        elif name == "WandbLogger":
            hints.append(
                f"logs: Weights & Biases run {logger.version} under {logger.save_dir}  "
                f"(an offline run uploads with: wandb sync {logger.save_dir}/wandb/offline-run-*)"
            )
        else:
            hints.append(f"logs: {log_dir}  ({name})")
    return "\n".join(hints)


def _resolved_arch(values: dict) -> dict:
    """Architecture values with derived fields filled in, for comparison."""
    config = ModelConfig.from_dict(dict(values))
    return {**config.to_dict(), "ffn_hidden": config.ffn_width, "init_std": config.std}


def main(args: Sequence[str] | None = None) -> int:
    """Run the CLI; known user errors print one line instead of a traceback."""
    try:
        LitSparseCLI(args)
    except Exception as err:
        user_error = find_user_error(err) or storage_failure(err)
        if user_error is None:
            raise
        print(f"error: {user_error}", file=sys.stderr)
        return 2
    finally:
        release_all()  # the run folder is free for the next command of this process
    return 0


__all__ = ["LitSparseCLI", "LitSparseTrainer", "TextDataModule", "expand_attention_names", "main"]
