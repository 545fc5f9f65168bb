"""The one parser stack of the registered commands: a command's signature (a class's public
methods: subcommands) becomes a jsonargparse parser with ``--config FILE``, ``--print_config``
and ``--help``; a printed config fed back with ``--config`` runs the same command."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import types
import typing
from typing import Any

from jsonargparse import ActionConfigFile, ArgumentParser, Namespace

from lit_sparse.commands import CommandOptions, reports_errors
from lit_sparse.parsing.help_text import HelpFormatter, plain
from lit_sparse.parsing.list_options import join_list_values, list_options

PROG = "python -m lit_sparse"
SUBCOMMAND = "subcommand"
INTERNAL = ("config", "__path__", "print_config", SUBCOMMAND)


class CommandParser(ArgumentParser):
    """jsonargparse's parser with a parse error as one line (``error: <key>: <reason>``), plain
    help, list values as separate words (``--lengths 1024 2048``) and ``-`` or ``_`` alike in
    option names (``--kv-heads``)."""

    options: CommandOptions = CommandOptions()

    def parse_args(self, args=None, namespace=None, **kwargs):
        if args is not None and not isinstance(args, (dict, Namespace)):
            args = self.words(list(args))
        return super().parse_args(args, namespace, **kwargs)

    def words(self, args: list[str]) -> list[str]:
        """``args`` as jsonargparse reads them: spelled options, bare flags' values, lists."""
        hints, lists = _option_hints(self), list_options(self)
        if (chosen := _subcommand_parser(self, args)) is not None:
            # a subcommand's own options win over another's of the same name (bench
            # attention --dtype is one dtype, bench decode --dtype a list)
            own = _option_hints(chosen)
            hints.update(own)
            own_lists = list_options(chosen)
            lists = {o: k for o, k in lists.items() if o not in own or o in own_lists}
            lists.update(own_lists)
        out: list[str] = []
        for i, arg in enumerate(args):
            name, eq, value = arg.partition("=")
            if arg.startswith("--") and name not in hints:
                spelled = name.replace("-", "_")
                if "--" + spelled[2:] in hints:
                    name, arg = "--" + spelled[2:], "--" + spelled[2:] + eq + value
            out.append(arg)
            if name in hints and not eq and _bare(args, i):
                hint, dest = hints[name]
                if dest in self.options.bare:  # --run alone: --run= (an empty name)
                    value = self.options.bare[dest]
                    out[-1] = f"{name}={value if isinstance(value, str) else json.dumps(value)}"
                elif _is_bool(hint):
                    out.append("true")
        joined = join_list_values(out, lists)
        for i, arg in enumerate(joined[:-1]):  # one value of a list option: a list of one
            value = joined[i + 1]
            if lists.get(arg) == "list" and not value.startswith(("[", "-")) and value != "null":
                joined[i + 1] = f"[{value}]"
        return joined

    def format_help(self, *args, **kwargs) -> str:
        return plain(super().format_help(*args, **kwargs))

    def error(self, message: str, ex: Exception | None = None):
        if not self.exit_on_error:  # a programmatic parse wants the exception
            return super().error(message, ex)
        from lit_sparse.parsing.parse_errors import condense_parse_error

        reason = condense_parse_error(message)
        print(f"error: {reason}  ({self.prog} --help lists the options)", file=sys.stderr)
        raise SystemExit(2)


def _subcommand_parser(parser: argparse.ArgumentParser, args: list[str]) -> Any:
    """The parser of the subcommand named in ``args`` (None: none is)."""
    for action in parser._actions:
        if getattr(action, "choices", None) and hasattr(action, "_name_parser_map"):
            return next((action.choices[a] for a in args if a in action.choices), None)
    return None


def _bare(args: list[str], i: int) -> bool:
    """Whether the option ``args[i]`` has no value after it."""
    return i + 1 >= len(args) or (args[i + 1].startswith("--") and args[i + 1] != "--")


def _is_bool(hint: Any) -> bool:
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return hint is bool or (union and bool in typing.get_args(hint))


def _option_hints(parser: argparse.ArgumentParser) -> dict[str, tuple[Any, str]]:
    """Option string -> (type hint, dest) of a parser and its subcommands' parsers."""
    found: dict[str, tuple[Any, str]] = {}
    parsers = [parser]
    while parsers:
        current = parsers.pop()
        for action in current._actions:
            hint = getattr(action, "_typehint", None)
            for option in action.option_strings:
                found.setdefault(option, (hint, action.dest.rpartition(".")[2]))
            if getattr(action, "choices", None) and hasattr(action, "_name_parser_map"):
                parsers.extend(action.choices.values())
    return found


def build_parser(name: str, target: Any) -> CommandParser:
    """The parser of ``python -m lit_sparse <name>``: ``target``'s parameters as options."""
    options = _options(target)
    doc = inspect.getdoc(target) or ""
    parser = _parser(f"{PROG} {name}", doc.split("\n\nArgs:")[0], options)
    parser.add_argument(
        "--config",
        action=ActionConfigFile,
        help="the options from a YAML file, as --print_config writes them",
    )
    if inspect.isclass(target):
        subcommands = parser.add_subcommands(dest=SUBCOMMAND, required=True)
        for method in _methods(target):
            function = getattr(target, method)
            text = inspect.getdoc(function) or ""
            sub = _parser(f"{PROG} {name} {method}", text.split("\n\nArgs:")[0], options)
            _add_parameters(sub, target, method, options)
            subcommands.add_subcommand(method, sub, help=text.split("\n\n")[0])
    else:
        _add_parameters(parser, target, None, options)
    return parser


class _Formatter(HelpFormatter):
    """Options' help with the defaults worth showing; the description as written (its
    examples keep their lines)."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "".join(indent + line for line in plain(text).splitlines(keepends=True))


def _parser(prog: str, description: str, options: CommandOptions) -> CommandParser:
    parser = CommandParser(
        prog=prog, description=description, formatter_class=_Formatter, default_env=False
    )
    parser.options = options
    return parser


def _options(target: Any) -> CommandOptions:
    return getattr(target, "command_options", None) or CommandOptions()


def _methods(cls: type) -> list[str]:
    """A command class's subcommands: its public methods, in the order they are written."""
    return [
        name
        for name, value in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(value)
    ]


def _add_parameters(
    parser: CommandParser, target: Any, method: str | None, options: CommandOptions
) -> None:
    function = getattr(target, method) if method else target
    hints = typing.get_type_hints(function)
    signature = inspect.signature(function)
    skip = set(options.positional) & set(signature.parameters)
    for positional in options.positional:
        if positional not in signature.parameters:
            continue
        parameter = signature.parameters[positional]
        hint = hints.get(positional, str)
        origins = [typing.get_origin(hint), *map(typing.get_origin, typing.get_args(hint))]
        many = list in origins
        optional = parameter.default is not inspect.Parameter.empty
        nargs = ("*" if optional else "+") if many else ("?" if optional else None)
        extra = {"default": argparse.SUPPRESS} if optional else {}
        parser.add_argument(
            positional,
            nargs=nargs,
            help=_parameter_help(function, positional),
            **({} if many else {"type": hint}),
            **extra,
        )
    if method:
        parser.add_method_arguments(target, method, skip=skip)
    else:
        parser.add_function_arguments(function, skip=skip)


def _parameter_help(function: Any, name: str) -> str:
    from docstring_parser import parse

    for parameter in parse(inspect.getdoc(function) or "").params:
        if parameter.arg_name == name:
            return parameter.description or ""
    return ""


def split_passed_on(argv: list[str], options: CommandOptions) -> list[str]:
    """``argv`` with the words the command passes on (after ``--``; options of its
    ``passes_on`` prefixes and their values) gathered into one ``--passed_on`` list."""
    if not options.passes_on:
        return argv
    own: list[str] = []
    passed: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            passed += argv[i + 1 :]
            break
        if arg.startswith(tuple(options.passes_on)):
            passed.append(arg)
            i += 1
            while "=" not in arg and i < len(argv) and not argv[i].startswith("--"):
                passed.append(argv[i])
                i += 1
            continue
        own.append(arg)
        i += 1
    return own + (["--passed_on", json.dumps(passed)] if passed else [])


def _print_config_first(argv: list[str]) -> list[str]:
    """``--print_config`` moved before a subcommand's name, so it prints the whole command
    (the subcommand and its options: what ``--config`` reads back)."""
    if "--print_config" not in argv:
        return argv
    return ["--print_config", *(a for a in argv if a != "--print_config")]


def parse_words(name: str, target: Any, argv: list[str]) -> tuple[str | None, dict[str, Any]]:
    """``argv`` parsed for the command ``target`` registered as ``name``: the subcommand
    (None for a function) and the keyword arguments to call it with."""
    parser = build_parser(name, target)
    parsed = parser.parse_args(_print_config_first(split_passed_on(argv, _options(target))))
    if inspect.isclass(target):
        method = parsed[SUBCOMMAND]
        return method, _kwargs(parsed[method])
    return None, _kwargs(parsed)


@reports_errors
def run_command(name: str, target: Any, argv: list[str]) -> int:
    """Parse ``argv`` for the command ``target`` registered as ``name`` and call it."""
    if _options(target).raw:
        return _status(target(list(argv)))
    method, kwargs = parse_words(name, target, list(argv))
    call = getattr(target(), method) if method else target
    return _status(call(**kwargs))


def _kwargs(parsed: Namespace) -> dict[str, Any]:
    values = parsed.as_dict() if isinstance(parsed, Namespace) else dict(parsed)
    return {key: value for key, value in values.items() if key not in INTERNAL}


def _status(result: Any) -> int:
    return 0 if result is None else int(result)
