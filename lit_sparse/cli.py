"""LightningCLI for lit_sparse: the module, the data, argument links, friendly failures."""

from __future__ import annotations

import importlib
import re
import shutil
import sys
import tempfile
import warnings
from argparse import SUPPRESS
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from jsonargparse import Namespace, set_parsing_settings
from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from lit_sparse.callbacks import LengthExtrapolation

from .attention import build_attention
from .checkpoints import differences, find_last_checkpoint, read_checkpoint
from .config import ModelConfig
from .config_files import check_config_files, checked_seq_len, expand_attention_names
from .data import DataSourceUnavailable, TextDataModule
from .errors import CheckpointError, ConfigError, find_user_error
from .evaluation import ExtrapolationResult
from .list_options import join_list_values, list_options
from .module import LitLanguageModel

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
    reasons = [
        line.strip()[2:]
        for line in message.splitlines()
        if line.strip().startswith("- ")
        and "NoneType" not in line
        and not line.strip().endswith(":")  # a heading over a nested report
        and not line.strip().startswith("- Parser key")
    ]
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


class LitSparseTrainer(Trainer):
    """Lightning's Trainer with one more command, ``extrapolate``."""

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


class LitSparseCLI(LightningCLI):
    """``python -m lit_sparse fit|validate|test|extrapolate --config ...``."""

    def __init__(self, args: Sequence[str] | None = None, **kwargs):
        kwargs.setdefault("trainer_defaults", TRAINER_DEFAULTS)
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
        if self.config.get("subcommand") == "fit":
            self._continue_run(self.config.fit)

    def _continue_run(self, config: Namespace) -> None:
        """``fit --ckpt_path last|PATH``: resume in the checkpoint's own TensorBoard run.

        "last" is the newest last.ckpt of this config's experiment. The logger's version is
        pinned to the checkpoint's run and events after the checkpoint's step are purged,
        so curves continue without a gap or a duplicate; the config used for the resumed
        part is saved beside the original as config.resume-<step>.yaml.
        """
        ckpt_path, logger = config.get("ckpt_path"), config.trainer.get("logger")
        tensorboard = isinstance(logger, Namespace) and logger.class_path.endswith(
            "TensorBoardLogger"
        )
        experiment = (
            Path(logger.init_args.save_dir) / (logger.init_args.name or "") if tensorboard else None
        )
        if ckpt_path == "last" and experiment is not None:
            found = find_last_checkpoint(experiment)
            if found is None:
                print(f"no last.ckpt under {experiment}: starting a new run", file=sys.stderr)
            config.ckpt_path = None if found is None else str(found)
        if not config.ckpt_path or config.ckpt_path in ("last", "best", "hpc", "registry"):
            return
        path = Path(config.ckpt_path)
        step = int(read_checkpoint(path).get("global_step", 0))
        if experiment is not None and path.parent.name == "checkpoints":
            run_dir = path.parent.parent
            if run_dir.parent.resolve() == experiment.resolve():
                logger.init_args.version = run_dir.name
                logger.dict_kwargs = {**(logger.get("dict_kwargs") or {}), "purge_step": step}
        self.save_config_kwargs["config_filename"] = f"config.resume-{step}.yaml"

    def _parse_ckpt_path(self) -> None:
        """Refuse a checkpoint whose model differs from the config, naming what differs.

        (Lightning would silently replace the config's model with the checkpoint's.)
        """
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt_path and Path(ckpt_path).is_file():
            found = read_checkpoint(ckpt_path).get("hyper_parameters", {})
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
            if lines:
                raise CheckpointError(
                    f"ckpt_path={ckpt_path!r} holds a different model than the config: "
                    + "; ".join(f"model.{line}" for line in lines)
                    + " (use the run's own config.yaml)"
                )
        super()._parse_ckpt_path()

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
        for callback in trainer.callbacks:
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
        user_error = find_user_error(err)
        if user_error is None:
            raise
        print(f"error: {user_error}", file=sys.stderr)
        return 2
    return 0


__all__ = ["LitSparseCLI", "LitSparseTrainer", "TextDataModule", "expand_attention_names", "main"]
