"""call_in_fork: a function's result from a fork of this process, and a failed child named
by its exit code (its traceback on stderr), never a result."""

from __future__ import annotations

import os

import pytest

from lit_sparse.io.forks import call_in_fork

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _child_facts(n: int) -> dict:
    return {"pid": os.getpid(), "squares": [i * i for i in range(n)]}


def _fails() -> None:
    raise ValueError("the child's own error")


def test_the_result_comes_back_from_another_process():
    facts = call_in_fork(_child_facts, 4)
    assert facts["squares"] == [0, 1, 4, 9]
    assert facts["pid"] != os.getpid()


def test_a_large_result_passes_the_pipe():
    assert len(call_in_fork(_child_facts, 100_000)["squares"]) == 100_000


def test_a_failed_child_raises_with_its_exit_code_and_traceback(capfd):
    with pytest.raises(ChildProcessError, match=r"exit 1"):
        call_in_fork(_fails)
    assert "ValueError: the child's own error" in capfd.readouterr().err
