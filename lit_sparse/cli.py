"""LightningCLI for lit_sparse: the module, the data, argument links, friendly failures."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from jsonargparse import Namespace
from lightning.pytorch import LightningDataModule
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from .attention import get_attention, list_attention
from .data import DataSourceUnavailable, TextDataModule
from .module import LitLanguageModel

TRAINER_DEFAULTS = {
    "logger": {
        "class_path": "lightning.pytorch.loggers.TensorBoardLogger",
        "init_args": {"save_dir": "runs", "name": "lit_sparse"},
    },
}


def expand_attention_names(args: Sequence[str]) -> list[str]:
    """Let ``--model.attention fibonacci`` name a plugin by its registry name.

    jsonargparse resolves class names and import paths; a registry name is rewritten to
    its class path. Anything else is left for jsonargparse to accept or reject.
    """
    out, flag = list(args), "--model.attention"
    for i, arg in enumerate(out):
        if arg == flag and i + 1 < len(out):
            value, at = out[i + 1], i + 1
        elif arg.startswith(flag + "="):
            value, at = arg[len(flag) + 1 :], None
        else:
            continue
        if value in list_attention():
            cls = get_attention(value)
            path = f"{cls.__module__}.{cls.__qualname__}"
            if at is None:
                out[i] = f"{flag}={path}"
            else:
                out[at] = path
    return out


def data_vocab_size(data: Namespace) -> int:
    """The model vocabulary the data config implies, known before anything is built.

    A DataModule class provides ``model_vocab_size(**init_args)``; for text data it loads the
    tokenizer (a local file unless the config names a hub tokenizer).
    """
    module, _, name = data.class_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    init_args = data.get("init_args") or Namespace()
    return cls.model_vocab_size(**init_args.as_dict())


class LitSparseCLI(LightningCLI):
    """``python -m lit_sparse fit|validate|test|predict --config ...``."""

    def __init__(self, args: Sequence[str] | None = None, **kwargs):
        kwargs.setdefault("trainer_defaults", TRAINER_DEFAULTS)
        kwargs.setdefault("datamodule_class", LightningDataModule)
        kwargs.setdefault("subclass_mode_data", True)
        kwargs.setdefault("parser_kwargs", {"default_env": False})
        args = expand_attention_names(sys.argv[1:] if args is None else args)
        super().__init__(LitLanguageModel, args=args, **kwargs)

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
    except DataSourceUnavailable as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


__all__ = ["LitSparseCLI", "TextDataModule", "expand_attention_names", "main"]
