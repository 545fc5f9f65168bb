"""``python -m lit_sparse <command>``'s commands: typed functions (or classes, for a group of
subcommands) in one registry, the same :class:`~lit_sparse.registry.Registry` as attention
patterns and tasks. A built-in is a module of this package; another package registers its
own through the ``lit_sparse.commands`` entry point group (the studies' ``matrix``, ``bench``
...), loaded only when its command runs. One jsonargparse parser stack serves them all
(:mod:`lit_sparse.commands._dispatch`): ``--config FILE``, ``--print_config`` and ``--help``.

    @command("hello")
    def hello(name: str, times: int = 1) -> int:
        '''Say hello (the first line is the command's summary in ``python -m lit_sparse``).

        Args:
            name: who to greet
            times: how often
        '''
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lit_sparse.errors import LitSparseError, interrupted
from lit_sparse.io.atomic import write_json
from lit_sparse.registry import Registry

__all__ = [
    "COMMANDS",
    "CommandOptions",
    "command",
    "parse_command",
    "print_report",
    "summary",
]
"""The public names: a package registering its commands (the studies) needs only these."""

LIGHTNING_COMMANDS = ("fit", "validate", "test", "extrapolate")
"""LightningCLI's commands (lit_sparse/cli.py), reserved names."""

GROUP = "lit_sparse.commands"
"""The entry point group of other packages' commands: ``name = "module:function_or_class"``."""

STUDIES = ("lit_sparse", "lit_sparse_studies")
"""The packages of lit_sparse's own distribution: their commands are found first."""


@dataclass(frozen=True)
class CommandOptions:
    """How the dispatcher parses a command's words, beyond its signature."""

    positional: Sequence[str] = ()
    """Parameters taken as positional words (``path``; a list: any number of words)."""
    passes_on: Sequence[str] = ()
    """Prefixes of options the command passes on unparsed (``--model.``): they, and every word
    after ``--``, go to its ``passed_on: list[str]`` parameter (so a printed config holds them)."""
    bare: dict[str, Any] = field(default_factory=dict)
    """The value of an option given without one (``--run``: ``""``); a bool's is ``true``."""
    raw: bool = False
    """Every word goes to the function's ``argv`` unparsed (``lm-eval``: another program's
    options, ``--config`` and ``--help`` included)."""


def command(name: str, **options: Any) -> Callable[[Any], Any]:
    """Register a function (or a class whose public methods are subcommands) as ``name``;
    ``options`` are :class:`CommandOptions`'s fields."""

    def register(target: Any) -> Any:
        target.command_options = CommandOptions(**options)
        return COMMANDS.register(name)(target)

    return register


class CommandRegistry(Registry):
    """Commands by name. Installed packages' entry points are resolved from their metadata
    (``python -m lit_sparse --help`` imports none of them) and loaded one at a time, when their
    command runs: a broken one fails only itself. A name that is taken (a built-in, Lightning's,
    or found earlier, the studies' first) is one warning and never replaces the other."""

    def __init__(self) -> None:
        super().__init__("command", object, __name__, GROUP)
        self._installed: dict[str, importlib.metadata.EntryPoint] | None = None

    def refuses(self, obj: object, shown: str) -> str:
        if callable(obj):
            return ""
        return f"{shown} names a {type(obj).__name__}, not a function or a class"

    def entry_points(self) -> list[importlib.metadata.EntryPoint]:
        return sorted(super().entry_points(), key=lambda entry: not _ours(entry))

    def installed(self) -> dict[str, importlib.metadata.EntryPoint]:
        """Other packages' commands by name, unimported, after the checks of taken names."""
        if self._installed is None:
            taken = set(self.builtin_names()) | set(LIGHTNING_COMMANDS)
            found: dict[str, importlib.metadata.EntryPoint] = {}
            for entry in self.entry_points():
                kept = found.get(entry.name)
                if entry.name in taken:
                    _refused(entry, "lit_sparse has a command of that name")
                elif kept is not None and kept.value != entry.value:
                    _refused(entry, f"{kept.value} (from {_origin(kept)}) has that name")
                else:
                    found.setdefault(entry.name, entry)
            self._installed = found
        return self._installed

    def names(self) -> list[str]:
        return sorted({*self.builtin_names(), *self.installed()})

    def find(self, name: str) -> tuple[Any, str]:
        """The command ``name`` (an installed one loaded now) and '', or None and why not."""
        if name in self.builtin_names():
            return self.classes[name], ""
        entry = self.installed().get(name)
        if entry is None:
            return None, ""
        if name not in self.classes:
            problem = self._register_entry_point(entry, set(self.builtin_names()))
            if problem:
                return None, f"command {name!r} ({entry.value}) cannot be loaded: {problem}"
        return self.classes[name], ""


def _ours(entry: importlib.metadata.EntryPoint) -> bool:
    return entry.value.partition(":")[0].partition(".")[0].strip() in STUDIES


def _origin(entry: importlib.metadata.EntryPoint) -> str:
    return getattr(entry.dist, "name", None) or "an unknown distribution"


def _refused(entry: importlib.metadata.EntryPoint, why: str) -> None:
    """One line on stderr (not a log record: a command line's logging may be configured away)."""
    print(
        f"warning: command {entry.name!r} ({entry.value}, from {_origin(entry)}) is not added: "
        f"{why}",
        file=sys.stderr,
    )


COMMANDS = CommandRegistry()


def summary(target: Any) -> str:
    """A command's one-line summary: its docstring's first sentence."""
    text = _first_sentence(getattr(target, "__doc__", None) or "") or getattr(target, "name", "")
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def entry_summary(entry: importlib.metadata.EntryPoint) -> str:
    """An installed command's summary without importing it: its module docstring's first
    sentence (else the entry point's target)."""
    try:
        spec = importlib.util.find_spec(entry.module)
        doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) if spec else None
    except (ImportError, OSError, SyntaxError, ValueError):
        doc = None
    return _first_sentence(doc or "") or entry.value


def _first_sentence(doc: str) -> str:
    sentence = " ".join(doc.split("\n\n")[0].split()).split(". ")[0].rstrip(".")
    sentence = sentence.split("``: ", 1)[-1]
    return sentence if len(sentence) <= 74 else sentence[:74].rsplit(" ", 1)[0].rstrip(",") + " ..."


def parse_command(name: str, argv: Sequence[str]) -> tuple[str | None, dict[str, Any]]:
    """The options the command ``name`` would be called with for ``argv`` (a parse error:
    one line, SystemExit 2): the subcommand (None for a function) and its keyword arguments."""
    from lit_sparse.commands._dispatch import parse_words

    target, problem = COMMANDS.find(name)
    if target is None:
        raise LitSparseError(problem or f"no command {name!r}")
    return parse_words(name, target, list(argv))


def reports_errors(main: Callable[..., int]) -> Callable[..., int]:
    """``main`` with a LitSparseError as one ``error:`` line (exit 2), Ctrl-C as one (130)."""

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> int:
        try:
            return main(*args, **kwargs)
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
