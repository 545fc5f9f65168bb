"""The commands' parser stack (lit_sparse/commands/_dispatch.py): a parse error of a
command is one line naming the option and the value, without the usage."""

from __future__ import annotations

import sys

import pytest

from lit_sparse.__main__ import main as lit_main


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (
            ["/tmp", "--temperature", "nan"],
            "temperature: Expected a <class 'float'>. Got value: nan",
        ),
        (["/tmp", "--max_new_tokens", "many"], "max_new_tokens: Expected a <class 'int'>"),
        ([], "the following arguments are required: path"),
    ],
)
def test_a_parse_error_is_one_line_without_the_usage(args, shown, capsys):
    """Issue 57 (minor): ``generate --temperature nan`` printed the usage (twice, in the
    walk), a tip and a two-line report."""
    with pytest.raises(SystemExit) as info:
        lit_main(["generate", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {shown}")
    assert err.endswith("(python -m lit_sparse generate --help lists the options)\n")
