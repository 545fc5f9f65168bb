"""``python -m lit_sparse <command>``: Lightning's, the project's own and installed packages'."""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path

# command -> description; run by lit_sparse.commands.<command, dashes as _>.main(argv) -> int
OWN_COMMANDS = {
    "tasks": "the registered choice tasks on a checkpoint; --list: every task",
    "recall": "a recall run's accuracy at longer lengths, under both new_offsets policies",
    "generate": "continue a prompt with a trained model (a run or an export)",
    "export": "a run's model as safetensors + config.json + tokenizer + card",
    "lm-eval": "lm-evaluation-harness with the lit_sparse model (every lm-eval option)",
    "lm-eval-tasks": "the folder of lit_sparse's lm-eval tasks (for --include_path)",
    "plugins": "the registered attention plugins: origin, options, defaults",
}


LIGHTNING_COMMANDS = ("fit", "validate", "test", "extrapolate")

COMMAND_ENTRY_POINTS = "lit_sparse.commands"
"""Entry point group of other packages' commands: ``name = "module:main"`` (argv -> int)."""


def installed_commands() -> dict[str, importlib.metadata.EntryPoint]:
    """Other packages' commands by name, unimported. A name lit_sparse has (its own, Lightning's)
    or one already found warns and is left out, except that the studies' commands win over
    another package's: a clash never silently replaces a command."""
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for entry in importlib.metadata.entry_points(group=COMMAND_ENTRY_POINTS):
        if entry.name in OWN_COMMANDS or entry.name in LIGHTNING_COMMANDS:
            _not_added(entry, "lit_sparse has a command of that name")
            continue
        kept = found.setdefault(entry.name, entry)
        if kept is entry or kept.value == entry.value:
            continue
        if _studies(entry) and not _studies(kept):  # the studies' command wins
            found[entry.name], kept, entry = entry, entry, kept
        _not_added(entry, f"{kept.value} (from {_origin(kept)}) has that name")
    return found


def _studies(entry: importlib.metadata.EntryPoint) -> bool:
    """A command of lit_sparse's own distribution (the studies' ``matrix``, ``bench``, ...)."""
    package = entry.value.partition(":")[0].partition(".")[0].strip()
    return package in ("lit_sparse", "lit_sparse_studies")


def _origin(entry: importlib.metadata.EntryPoint) -> str:
    return getattr(entry.dist, "name", None) or "an unknown distribution"


def _not_added(entry: importlib.metadata.EntryPoint, why: str) -> None:
    print(
        f"warning: command {entry.name!r} ({entry.value}, from {_origin(entry)}) is not added: "
        f"{why}",
        file=sys.stderr,
    )


def summary(entry: importlib.metadata.EntryPoint) -> str:
    """An installed command's module docstring's first sentence (not imported), else its target."""
    try:
        spec = importlib.util.find_spec(entry.module)
        doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) if spec else None
    except (ImportError, OSError, SyntaxError, ValueError):
        doc = None
    if not doc:
        return entry.value
    sentence = " ".join(doc.split("\n\n")[0].split()).split(". ")[0].rstrip(".")
    sentence = sentence.split("``: ", 1)[-1]
    return sentence if len(sentence) <= 74 else sentence[:74].rsplit(" ", 1)[0].rstrip(",") + " ..."


def _usage() -> str:
    own = "\n".join(f"  {name:<14}{text}" for name, text in OWN_COMMANDS.items())
    added = "\n".join(
        f"  {name:<14}{summary(entry)}" for name, entry in sorted(installed_commands().items())
    )
    return (
        "usage: python -m lit_sparse <command> [options]\n\n"
        "Lightning commands (<command> --help: the options set most; --help=full: all):\n"
        "  fit         train a model:  fit --config configs/coprime.yaml\n"
        "  validate    evaluate a checkpoint on the held-out sets\n"
        "  test        a checkpoint on the held-out sets, as validate (logged as test/*)\n"
        "  extrapolate perplexity of a checkpoint at several evaluation lengths\n\n"
        f"lit_sparse commands:\n{own}\n"
        + (
            f"\ncommands of installed packages ({COMMAND_ENTRY_POINTS}):\n{added}\n"
            if added
            else ""
        )
    )


def _run_installed(entry: importlib.metadata.EntryPoint, argv: list[str]) -> int:
    """An installed package's command; one error line when it cannot be loaded."""
    try:
        command = entry.load()
    except (Exception, SystemExit) as err:  # anything a broken package raises on import
        reason = f"{type(err).__name__}: {' '.join(str(err).split())}"
        print(f"error: command {entry.name!r} ({entry.value}) cannot be loaded: {reason}",
              file=sys.stderr)  # fmt: skip
        return 2
    if not callable(command):
        what = type(command).__name__
        print(
            f"error: command {entry.name!r} ({entry.value}) cannot be run: it names a {what}, "
            "not a function main(argv) -> int",
            file=sys.stderr,
        )
        return 2
    from lit_sparse.errors import LitSparseError

    try:
        return command(argv)
    except LitSparseError as err:  # a command not wrapped in reports_errors: still one line
        print(f"error: {err}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if argv[0] in OWN_COMMANDS:
        module = importlib.import_module(f"lit_sparse.commands.{argv[0].replace('-', '_')}")
        return module.main(argv[1:])
    if argv[0] not in LIGHTNING_COMMANDS and not argv[0].startswith("-"):
        installed = installed_commands()
        if (entry := installed.get(argv[0])) is not None:
            return _run_installed(entry, argv[1:])
        known = [*LIGHTNING_COMMANDS, *OWN_COMMANDS, *sorted(installed)]
        near = difflib.get_close_matches(argv[0], known, n=1)
        guess = f" (did you mean {near[0]!r}?)" if near else ""
        print(
            f"error: unknown command {argv[0]!r}{guess}; the commands: {', '.join(known)} "
            "(--help describes them)",
            file=sys.stderr,
        )
        return 2
    from lit_sparse.cli import main as lightning_main

    return lightning_main(argv)


def run() -> None:
    """The console script: exit with main's status (an early Ctrl-C: one line, status 130)."""
    try:
        sys.exit(main())
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        from lit_sparse.errors import interrupted

        sys.exit(interrupted())


if __name__ == "__main__":
    run()
