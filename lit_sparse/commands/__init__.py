"""The project's own commands, one module each, dispatched by ``python -m lit_sparse``
(``OWN_COMMANDS`` in ``lit_sparse/__main__.py`` lists them). Each module's ``main(argv) -> int``,
wrapped in :func:`reports_errors`, parses its options and calls the library, which computes.

:func:`command_parser` gives a command ``--config FILE`` (its options from YAML) and
``--print_config``; commands that read a model out of config files (the studies' ``coverage``
and ``flops``) take :func:`config_parser`'s options (their ``--config`` is the model's) and call
:func:`lit_sparse.parsing.config_files.read_model_config`.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

from jsonargparse import ActionConfigFile, ArgumentParser

from lit_sparse.errors import LitSparseError, interrupted
from lit_sparse.io.atomic import write_json
from lit_sparse.parsing.help_text import HelpFormatter


def reports_errors(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
    """A command's ``main``, with a :class:`LitSparseError` (bad input, a missing run) shown
    as one ``error: ...`` line on stderr and exit status 2 instead of a traceback, and Ctrl-C
    as one ``interrupted`` line and exit status 130 (:func:`interrupted`)."""

    @functools.wraps(main)
    def run(argv: list[str] | None = None) -> int:
        try:
            return main(argv)
        except LitSparseError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return interrupted()

    return run


def print_report(report: Any, json_path: str | None = None) -> int:
    """Print ``report.to_text()``; also write ``report.as_dict()`` to ``json_path`` if given."""
    print(report.to_text())
    if json_path:
        write_json(json_path, report.as_dict())
    return 0


def command_parser(command: str, description: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The option parser of ``python -m lit_sparse <command>`` (jsonargparse's, an argparse
    parser), its help in the project's format: ``--config`` reads the command's options from
    a YAML file and ``--print_config`` prints them as one; ``kwargs`` go to the parser (e.g.
    ``epilog``)."""
    kwargs.setdefault("formatter_class", HelpFormatter)
    parser = ArgumentParser(
        prog=f"python -m lit_sparse {command}", description=description, **kwargs
    )
    parser.add_argument(
        "--config",
        action=ActionConfigFile,
        help="the options from a YAML file (as --print_config writes them)",
    )
    return parser


def argparse_parser(command: str, description: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A plain argparse parser, for the commands jsonargparse cannot parse yet: subcommands
    parsed as argparse does (``bench``) and unknown ``--model.*`` overrides (``config_parser``).
    It takes ``--print_config`` too (:func:`parse_options` prints the options and exits)."""
    parser = argparse.ArgumentParser(
        formatter_class=HelpFormatter,
        prog=f"python -m lit_sparse {command}",
        description=description,
        **kwargs,
    )
    add_print_config(parser)
    return parser


def add_print_config(parser: argparse.ArgumentParser) -> None:
    """``--print_config``: print the parsed options as YAML and exit (a subcommand's parser
    takes it too, after the subcommand)."""
    parser.add_argument(
        "--print_config", action="store_true", help="print the options as YAML and exit"
    )


def parse_options(
    parser: argparse.ArgumentParser, argv: list[str] | None, known: bool = False
) -> Any:
    """``parser.parse_args(argv)`` (with ``known``: ``parse_known_args``, the rest passed
    on); with ``--print_config`` the options (and the passed-on rest, as ``passed_on``) are
    printed as YAML and the command exits 0."""
    args, rest = parser.parse_known_args(argv) if known else (parser.parse_args(argv), [])
    printing = vars(args).pop("print_config", False)  # the command sees only its own options
    if printing:
        import yaml

        options = {**vars(args), **({"passed_on": rest} if rest else {})}
        print(yaml.safe_dump(options, sort_keys=False), end="")
        raise SystemExit(0)
    return (args, rest) if known else args


def config_parser(command: str, description: str) -> argparse.ArgumentParser:
    """The options of a command on the model of config files: ``--config`` (repeatable),
    ``--length``, ``--json``; further ``--model.*`` / ``--data.*`` options are overrides."""
    parser = argparse_parser(
        command,
        description,
        epilog="Further options: --model.<key> VALUE and --data.<key> VALUE (as fit takes them).",
    )
    parser.add_argument(
        "--config", action="append", required=True, help="config file (repeat to layer)"
    )
    parser.add_argument("--length", type=int, default=None, help="T (default: training length)")
    parser.add_argument("--json", default=None, help="also write the result to this JSON file")
    return parser
