"""What the ``bench decode`` tests share: a tiny model's shape as options, and the bench
command run in the test's process."""

from __future__ import annotations

TINY = ["--n-layers", "2", "--d-model", "32", "--n-heads", "4", "--n-kv-heads", "2"]
TINY += ["--vocab-size", "256", "--training-length", "64", "--window", "4"]


def main(argv):
    """``python -m lit_sparse bench ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["bench", *argv])
