"""The Lightning commands' parser: one-line errors, list values, short help, no ``--optimizer``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jsonargparse import Namespace
from lightning.pytorch.cli import LightningArgumentParser

from lit_sparse.errors import ConfigError
from lit_sparse.parsing.help_text import plain
from lit_sparse.parsing.list_options import join_list_values, list_options
from lit_sparse.parsing.parse_errors import condense_parse_error
from lit_sparse.parsing.short_help import FULL_HELP, short_help


def full_help_requested(args: Sequence[str]) -> tuple[list[str], bool]:
    """``args`` with ``--help=full`` as ``--help``, and whether it was there."""
    full = FULL_HELP in args
    return ["--help" if arg == FULL_HELP else arg for arg in args], full


def help_requested(args: Sequence[str]) -> bool:
    """Whether ``args`` ask for -h, --help[=full], --<key>.help or --print_config."""
    names = (arg.split("=", 1)[0] for arg in args)
    return any(n in ("-h", "--help", "--print_config") or n.endswith(".help") for n in names)


PROG = "python -m lit_sparse"
"""The commands' program name in usage lines (argparse's default is ``__main__.py``)."""


class LitSparseArgumentParser(LightningArgumentParser):
    """One-line parse errors (``error: <key>: <reason>``), space-separated list values; usage
    lines say ``python -m lit_sparse``, a plugin's help (``--model.attention.help``) too."""

    def __init__(self, *args, **kwargs):
        if not args:  # argparse's first positional argument is the program name
            kwargs["prog"] = kwargs.get("prog") or PROG
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None, **kwargs):
        if args is not None and not isinstance(args, (dict, Namespace)):
            args = join_list_values(args, list_options(self))
        return super().parse_args(args, namespace, **kwargs)

    full_help = False
    """Print LightningCLI's help of every option (``--help=full``) instead of the short one."""

    def format_help(self, *args, **kwargs) -> str:
        """A Lightning command's short help; else (``full_help``, other parsers) jsonargparse's."""
        if self.full_help or "trainer" not in (self.groups or {}):
            return plain(super().format_help(*args, **kwargs))
        return short_help(self)

    def error(self, message: str, ex: Exception | None = None):
        if not self.exit_on_error:  # a programmatic parse wants the exception
            return super().error(message, ex)
        print(
            f"error: {condense_parse_error(message)}  (--help lists the options)", file=sys.stderr
        )
        raise SystemExit(2)


OPTIMIZER_OPTIONS = ("optimizer", "lr_scheduler")


def refuse_optimizer_option(where: str) -> None:
    """ConfigError for LightningCLI's ``--optimizer`` / ``--lr_scheduler``, naming the module's."""
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


def check_optimizer_values(config: Namespace) -> None:
    """Refuse a config's ``optimizer`` / ``lr_scheduler`` value (saved configs carry null)."""
    for key in OPTIMIZER_OPTIONS:
        if (value := config.get(key)) is not None:
            shown = value.get("class_path", value) if isinstance(value, Namespace) else value
            refuse_optimizer_option(f"{key}: {shown} (in a config file)")
