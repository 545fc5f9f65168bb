"""LightningCLI for ``python -m lit_sparse fit|validate|test|extrapolate``: wiring only."""

from __future__ import annotations

import shutil
import sys
import tempfile
import warnings
from argparse import SUPPRESS
from collections.abc import Sequence
from functools import partialmethod
from pathlib import Path
from typing import Any

import yaml
from jsonargparse import Namespace, set_parsing_settings
from lightning.pytorch import LightningDataModule, Trainer
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from lit_sparse.attention.registry import expand_attention_names
from lit_sparse.data import DataSourceUnavailable, checked_seq_len
from lit_sparse.errors import find_user_error, interrupted
from lit_sparse.io.atomic import storage_failure
from lit_sparse.io.class_paths import import_class
from lit_sparse.io.yaml_files import check_config_files
from lit_sparse.legacy import translate_config_args
from lit_sparse.module import LitLanguageModel
from lit_sparse.parsing import arguments
from lit_sparse.runs import is_global_rank_zero, launch, release_all
from lit_sparse.runs.checkpoint_files import is_checkpoint
from lit_sparse.runs.matching import check_checkpoint
from lit_sparse.runs.memory import keep_freed_memory
from lit_sparse.runs.quiet import quiet_evaluation, quiet_lightning
from lit_sparse.runs.summary import fit_summary
from lit_sparse.runs.trainer import (
    LitSparseTrainer,
    check_trainer_options,
    drop_checkpoint_callbacks,
    with_run_callbacks,
)
from lit_sparse.tasks.registry import expand_task_names

TRAINER_DEFAULTS = {
    "logger": {
        "class_path": "lightning.pytorch.loggers.TensorBoardLogger",
        "init_args": {"save_dir": "runs", "name": "lit_sparse"},
    },
    "plugins": [{"class_path": "lit_sparse.runs.checkpoints.AtomicCheckpointIO"}],
}
PARSER_KWARGS = {"default_env": False, "prog": "python -m lit_sparse"}


def data_vocab_size(data: Namespace) -> int:
    """The model vocabulary of the data config before anything is built (``model_vocab_size``)."""
    cls = import_class(data.class_path)
    init_args = data.get("init_args") or Namespace()
    try:
        return cls.model_vocab_size(**init_args.as_dict())
    except DataSourceUnavailable as err:  # jsonargparse would bury it under usage text
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from None


class LitSparseCLI(LightningCLI):
    """``python -m lit_sparse fit|validate|test|extrapolate --config ...``."""

    def __init__(self, args: Sequence[str] | None = None, **kwargs):
        kwargs.setdefault("trainer_defaults", TRAINER_DEFAULTS)
        kwargs.setdefault("save_config_callback", launch.RunConfigCallback)
        kwargs.setdefault("datamodule_class", LightningDataModule)
        kwargs.setdefault("subclass_mode_data", True)
        kwargs.setdefault("parser_kwargs", PARSER_KWARGS)
        kwargs.setdefault("trainer_class", LitSparseTrainer)
        kwargs.setdefault("parser_class", arguments.LitSparseArgumentParser)
        # the module configures its optimizer and schedule (model.lr, model.optimizer, ...)
        kwargs.setdefault("auto_configure_optimizers", False)
        quiet_lightning()
        args, self.full_help = arguments.full_help_requested(sys.argv[1:] if args is None else args)
        # field docstrings become --help text; reading them costs 0.7 s a parser: only for help
        set_parsing_settings(docstring_parse_attribute_docstrings=arguments.help_requested(args))
        args = expand_task_names(expand_attention_names(args))
        self.command_line = list(args)  # fit names a run by an attention given here
        check_config_files(args)
        args = translate_config_args(args)  # an earlier version's config: today's form, a note
        arguments.check_optimizer_args(args)
        commands = self.subcommands()
        if args and args[0] in commands:  # only the command run gets a parser (seconds each)
            self.subcommands = lambda: {args[0]: commands[args[0]]}
        self.scratch_dir: Path | None = None  # fast_dev_run's files, removed at the end
        self.log_stem: str | None = None  # an evaluation's folder name under <run>/evals
        try:
            with warnings.catch_warnings():  # args came from sys.argv: not a mistake here
                warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
                super().__init__(LitLanguageModel, args=args, **kwargs)
        finally:
            if self.scratch_dir is not None:
                shutil.rmtree(self.scratch_dir, ignore_errors=True)

    def init_parser(self, **kwargs) -> LightningArgumentParser:
        parser = super().init_parser(**kwargs)
        parser.full_help = self.full_help  # --help=full: LightningCLI's help of every option
        return parser

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """fit, validate, test and extrapolate; not predict (generation is its own command)."""
        commands = {k: v for k, v in LightningCLI.subcommands().items() if k != "predict"}
        return {**commands, "extrapolate": {"model", "datamodule"}}

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        # saved configs carry "optimizer: null" (LightningCLI's keys): accepted, a value refused
        for key in arguments.OPTIMIZER_OPTIONS:
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
        config = self.config[subcommand]
        check_trainer_options(config.trainer, subcommand)
        dropped = drop_checkpoint_callbacks(config.trainer)
        if dropped and subcommand == "fit" and is_global_rank_zero():
            print(
                "note: trainer.enable_checkpointing=false: the config's ModelCheckpoint "
                "callbacks are left out, so this run saves no checkpoint and cannot be resumed",
                file=sys.stderr,
            )
        if subcommand == "fit":
            launch.name_run_by_attention(config, self.command_line)
            dump = self._parser("fit").dump

            def dumped() -> dict:
                return yaml.safe_load(dump(config, skip_none=False)) or {}

            launch.continue_run(config, self.save_config_kwargs, dumped)
        else:
            self.log_stem = launch.evaluation_log_dir(config, subcommand)

    def _parse_ckpt_path(self) -> None:
        """Check the checkpoint before anything is built; the command's model values hold."""
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if ckpt_path and is_checkpoint(ckpt_path):  # a file, or a sharded checkpoint's folder
            filename = self.save_config_kwargs.get("config_filename")
            check_checkpoint(self.config[subcommand], subcommand, filename)

    def before_instantiate_classes(self) -> None:
        """Refuse an optimizer / lr_scheduler value; ``fast_dev_run`` writes to a temp folder."""
        subcommand = self.config.get("subcommand")
        config = self.config[subcommand] if subcommand else self.config
        arguments.check_optimizer_values(config)
        launch.without_hp_metric(config)
        if config.trainer.get("fast_dev_run"):
            self.scratch_dir = Path(tempfile.mkdtemp(prefix="lit_sparse-fast_dev_run-"))
            config.trainer.default_root_dir = str(self.scratch_dir)

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        if self.scratch_dir is not None:  # a checkpoint folder named in the config, too
            for callback in self.trainer.checkpoint_callbacks:
                callback.dirpath = str(self.scratch_dir / "checkpoints")

    def instantiate_trainer(self, **kwargs) -> Trainer:
        trainer = super().instantiate_trainer(**kwargs)
        with_run_callbacks(trainer.callbacks)
        return trainer

    def _before(self, subcommand: str) -> None:
        """Callbacks that cannot work with this data refuse now; then the log folder."""
        keep_freed_memory()  # large activations stay mapped between steps
        if subcommand != "fit":
            quiet_evaluation()
        if subcommand != "test":
            for callback in self.trainer.callbacks:
                check = getattr(callback, "check_data", None)
                if callable(check) and self.datamodule is not None:
                    check(self.datamodule)
        first_batch = getattr(self.datamodule, "check_train_batch", None)
        if subcommand == "fit" and callable(first_batch):
            first_batch()  # a task generator's bad output is one line, before the run folder
        ckpt_path = self.config[subcommand].get("ckpt_path")
        filename = self.save_config_kwargs.get("config_filename", "config.yaml")
        launch.claim_log_dir(self.trainer, subcommand, ckpt_path, self.log_stem, filename)

    before_fit = partialmethod(_before, "fit")
    before_validate = partialmethod(_before, "validate")
    before_test = partialmethod(_before, "test")
    before_extrapolate = partialmethod(_before, "extrapolate")

    def after_fit(self) -> None:
        log_dir = self.trainer.log_dir  # a collective under DDP: every process asks
        if self.trainer.is_global_zero:
            print(fit_summary(self.trainer, log_dir))


def _interrupted(subcommand: str | None) -> int:
    """Ctrl-C: one line, exit status 130."""
    if subcommand == "fit":
        return interrupted("the run stopped; --ckpt_path last resumes it from its last checkpoint")
    return interrupted(f"{subcommand} stopped" if subcommand else "")


def main(args: Sequence[str] | None = None) -> int:
    """Run the CLI; a user error prints one line instead of a traceback, Ctrl-C one line (130)."""
    argv = list(sys.argv[1:] if args is None else args)
    subcommand = next((a for a in argv if not a.startswith("-")), None)
    try:
        LitSparseCLI(args)
    except KeyboardInterrupt:  # outside the trainer (parsing, building the data)
        return _interrupted(subcommand)
    except SystemExit as exit_:  # Lightning's graceful stop ends with sys.exit(1)
        if isinstance(exit_.__context__, KeyboardInterrupt):
            return _interrupted(subcommand)
        raise
    except Exception as err:
        if (user_error := find_user_error(err) or storage_failure(err)) is None:
            raise
        print(f"error: {user_error}", file=sys.stderr)
        return 2
    finally:
        release_all()  # the run folder is free for the next command of this process
    return 0
