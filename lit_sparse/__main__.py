"""``python -m lit_sparse <command>``: LightningCLI's (fit, validate, test, extrapolate), and the
registered commands (:mod:`lit_sparse.commands`: built-in and installed packages')."""

from __future__ import annotations

import difflib
import os
import sys

from lit_sparse.commands import COMMANDS, GROUP, LIGHTNING_COMMANDS, entry_summary, summary


def _usage() -> str:
    own = "\n".join(
        f"  {name:<14}{summary(COMMANDS.classes[name])}" for name in COMMANDS.builtin_names()
    )
    added = "\n".join(
        f"  {name:<14}{entry_summary(entry)}"
        for name, entry in sorted(COMMANDS.installed().items())
    )
    return (
        "usage: python -m lit_sparse <command> [options]\n\n"
        "Lightning commands (<command> --help: the options set most; --help=full: all):\n"
        "  fit         train a model:  fit --config configs/coprime.yaml\n"
        "  validate    evaluate a checkpoint on the held-out sets\n"
        "  test        a checkpoint on the held-out sets, as validate (logged as test/*)\n"
        "  extrapolate perplexity of a checkpoint at several evaluation lengths\n\n"
        f"lit_sparse commands (<command> --help; --config FILE, --print_config):\n{own}\n"
        + (f"\ncommands of installed packages ({GROUP}):\n{added}\n" if added else "")
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    if argv[0] in LIGHTNING_COMMANDS or argv[0].startswith("-"):
        from lit_sparse.cli import main as lightning_main

        return lightning_main(argv)
    target, problem = COMMANDS.find(argv[0])
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if target is None:
        known = [*LIGHTNING_COMMANDS, *COMMANDS.names()]
        near = difflib.get_close_matches(argv[0], known, n=1)
        guess = f" (did you mean {near[0]!r}?)" if near else ""
        print(
            f"error: unknown command {argv[0]!r}{guess}; the commands: {', '.join(known)} "
            "(--help describes them)",
            file=sys.stderr,
        )
        return 2
    from lit_sparse.commands._dispatch import run_command

    return run_command(argv[0], target, argv[1:])


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
