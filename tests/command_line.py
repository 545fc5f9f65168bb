"""A command of ``python -m lit_sparse`` as a function of its words, run in the test's process."""

from __future__ import annotations

from collections.abc import Callable


def command(name: str) -> Callable[[list[str]], int]:
    """``command("bench")(["attention"])``: ``python -m lit_sparse bench attention``."""

    def run(argv: list[str]) -> int:
        from lit_sparse.__main__ import main

        return main([name, *argv])

    return run
