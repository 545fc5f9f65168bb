"""LightningCLI for lit_sparse: the module, the data, argument links, friendly failures."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from jsonargparse import Namespace, set_parsing_settings
from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from callbacks import LengthExtrapolation

from .attention import get_attention, list_attention
from .data import DataSourceUnavailable, TextDataModule, find_unavailable
from .evaluation import ExtrapolationResult
from .module import LitLanguageModel

# field docstrings (ModelConfig, SourceConfig) become --help text
set_parsing_settings(docstring_parse_attribute_docstrings=True)

TRAINER_DEFAULTS = {
    "logger": {
        "class_path": "lightning.pytorch.loggers.TensorBoardLogger",
        "init_args": {"save_dir": "runs", "name": "lit_sparse"},
    },
}


def expand_attention_names(args: Sequence[str]) -> list[str]:
    """Let ``--model.attention fibonacci`` (and ``--model.attention.help fibonacci``) name a
    plugin by its registry name.

    jsonargparse resolves class names and import paths; a registry name is rewritten to
    its class path. Anything else is left for jsonargparse to accept or reject.
    """
    out = list(args)
    for i, arg in enumerate(out):
        for flag in ("--model.attention", "--model.attention.help"):
            if arg == flag and i + 1 < len(out) and out[i + 1] in list_attention():
                out[i + 1] = _class_path(out[i + 1])
            elif arg.startswith(flag + "=") and arg[len(flag) + 1 :] in list_attention():
                out[i] = f"{flag}={_class_path(arg[len(flag) + 1 :])}"
    return out


def _class_path(name: str) -> str:
    cls = get_attention(name)
    return f"{cls.__module__}.{cls.__qualname__}"


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
    """``python -m lit_sparse fit|validate|test|predict|extrapolate --config ...``."""

    def __init__(self, args: Sequence[str] | None = None, **kwargs):
        kwargs.setdefault("trainer_defaults", TRAINER_DEFAULTS)
        kwargs.setdefault("datamodule_class", LightningDataModule)
        kwargs.setdefault("subclass_mode_data", True)
        kwargs.setdefault("parser_kwargs", {"default_env": False})
        kwargs.setdefault("trainer_class", LitSparseTrainer)
        args = expand_attention_names(sys.argv[1:] if args is None else args)
        with warnings.catch_warnings():  # args came from sys.argv: not a mistake here
            warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
            super().__init__(LitLanguageModel, args=args, **kwargs)

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        return {**LightningCLI.subcommands(), "extrapolate": {"model", "datamodule"}}

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.init_args.seq_len", "model.arch.context_length")
        parser.link_arguments("data", "model.arch.vocab_size", compute_fn=data_vocab_size)
        parser.link_arguments("trainer.max_steps", "model.max_steps")

    def after_fit(self) -> None:
        trainer = self.trainer
        if not trainer.is_global_zero:
            return
        lines = [f"logs: {trainer.log_dir}  (tensorboard --logdir {Path(trainer.log_dir).parent})"]
        callback = trainer.checkpoint_callback
        if callback is not None and callback.dirpath:
            lines.append(f"checkpoints: {callback.dirpath}")
        print("\n".join(lines))


def main(args: Sequence[str] | None = None) -> int:
    """Run the CLI; known user errors print one line instead of a traceback."""
    try:
        LitSparseCLI(args)
    except Exception as err:
        unavailable = find_unavailable(err)
        if unavailable is None:
            raise
        print(f"error: {unavailable}", file=sys.stderr)
        return 2
    return 0


__all__ = ["LitSparseCLI", "LitSparseTrainer", "TextDataModule", "expand_attention_names", "main"]
