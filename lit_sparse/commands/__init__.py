"""The project's own commands, one module each with ``main(argv) -> int``; their shared parsers."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import Any

from jsonargparse import ActionConfigFile, ArgumentParser

from lit_sparse.errors import ConfigError, LitSparseError, interrupted
from lit_sparse.io.atomic import write_json
from lit_sparse.parsing.help_text import HelpFormatter
from lit_sparse.parsing.parse_errors import condense_parse_error


def reports_errors(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
    """``main`` with a LitSparseError as one ``error:`` line (exit 2), Ctrl-C as one (130)."""

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


class _OneLineErrors(ArgumentParser):
    """jsonargparse's parser with a parse error as one line (``error: <key>: <reason>``), not
    the usage, a tip and the report."""

    def error(self, message: str, ex: Exception | None = None):
        if not self.exit_on_error:  # a programmatic parse wants the exception
            return super().error(message, ex)
        reason = condense_parse_error(message)
        print(f"error: {reason}  ({self.prog} --help lists the options)", file=sys.stderr)
        raise SystemExit(2)


def command_parser(command: str, description: str, **kwargs: Any) -> argparse.ArgumentParser:
    """The jsonargparse parser of ``python -m lit_sparse <command>``, with ``--config`` (YAML);
    a parse error is one line."""
    kwargs.setdefault("formatter_class", HelpFormatter)
    parser = _OneLineErrors(
        prog=f"python -m lit_sparse {command}", description=description, **kwargs
    )
    parser.add_argument(
        "--config",
        action=ActionConfigFile,
        help="the options from a YAML file (as --print_config writes them)",
    )
    return parser


def argparse_parser(command: str, description: str, **kwargs: Any) -> argparse.ArgumentParser:
    """An argparse parser with ``--print_config`` (argparse subcommands, unknown ``--model.*``)."""
    parser = argparse.ArgumentParser(
        formatter_class=HelpFormatter,
        prog=f"python -m lit_sparse {command}",
        description=description,
        **kwargs,
    )
    add_print_config(parser)
    parser.add_argument(
        "--options",
        metavar="FILE",
        help="the options from a YAML file, as --print_config writes them (the command "
        "line's own come after them)",
    )
    return parser


def add_print_config(parser: argparse.ArgumentParser) -> None:
    """``--print_config``: print the parsed options as YAML and exit."""
    parser.add_argument(
        "--print_config", action="store_true", help="print the options as YAML and exit"
    )


def _options_file(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` with ``--options FILE`` replaced by the options the file holds, as command
    line words (a key that is no option of the command: one ConfigError line)."""
    at = next(
        (i for i, a in enumerate(argv) if a == "--options" or a.startswith("--options=")), None
    )
    if at is None:
        return argv
    if "=" in argv[at]:
        path, rest = argv[at].split("=", 1)[1], argv[at + 1 :]
    elif at + 1 < len(argv):
        path, rest = argv[at + 1], argv[at + 2 :]
    else:
        raise ConfigError("--options: expected a YAML FILE (as --print_config writes it)")
    from lit_sparse.io.yaml_files import load_yaml

    values = load_yaml(path, "options file")
    if not isinstance(values, dict):
        raise ConfigError(f"--options {path}: expected 'option: value' lines (--print_config's)")
    flags = {
        action.dest: next((o for o in action.option_strings if o.startswith("--")), None)
        for action in parser._actions
    }
    words: list[str] = []
    for key, value in values.items():
        if key == "passed_on":
            continue
        flag = flags.get(key)
        if flag is None or key in ("options", "print_config", "help"):
            hidden = ("help", "options", "print_config")
            allowed = ", ".join(k for k, f in flags.items() if f and k not in hidden)
            raise ConfigError(f"--options {path}: {key!r} is no option of this command: {allowed}")
        if value is None or value is False:
            continue
        if value is True:
            words.append(flag)
        elif isinstance(value, list):
            words += [flag, *map(str, value)]
        else:
            words += [flag] + ([str(value)] if value != "" else [])
    passed_on = [str(v) for v in values.get("passed_on") or []]
    return argv[:at] + words + rest + passed_on


def parse_options(
    parser: argparse.ArgumentParser, argv: list[str] | None, known: bool = False
) -> Any:
    """``parser.parse_args`` (``known``: ``parse_known_args``); ``--options FILE``: the
    options ``--print_config`` wrote; ``--print_config``: YAML, exit."""
    argv = _options_file(parser, list(sys.argv[1:] if argv is None else argv))
    args, rest = parser.parse_known_args(argv) if known else (parser.parse_args(argv), [])
    printing = vars(args).pop("print_config", False)  # the command sees only its own options
    vars(args).pop("options", None)
    if printing:
        import yaml

        options = {**vars(args), **({"passed_on": rest} if rest else {})}
        print(yaml.safe_dump(options, sort_keys=False), end="")
        raise SystemExit(0)
    return (args, rest) if known else args


def config_parser(command: str, description: str) -> argparse.ArgumentParser:
    """Options of a command reading a model from config files (``--model.*``, ``--data.*`` too)."""
    epilog = "Further options: --model.<key> VALUE and --data.<key> VALUE (as fit takes them)."
    parser = argparse_parser(command, description, epilog=epilog)
    parser.add_argument(
        "--config", action="append", required=True, help="config file (repeat to layer)"
    )
    parser.add_argument("--length", type=int, help="T (default: training length)")
    parser.add_argument("--json", help="also write the result to this JSON file")
    return parser
