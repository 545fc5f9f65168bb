"""The commands' parser stack (lit_sparse/commands/_dispatch.py): a command's words as its
keyword arguments (options spelled with - or _, a bare flag, a list as separate words, the
options it passes on gathered into one list), and a parse error of a command is one line
naming the option and the value, without the usage."""

from __future__ import annotations

import json
import sys

import pytest

from lit_sparse.__main__ import main as lit_main
from lit_sparse.commands import CommandOptions
from lit_sparse.commands._dispatch import parse_words, split_passed_on


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


def tiny(
    kv_heads: int = 1,
    lengths: list[int] | None = None,
    quiet: bool = False,
    run: str | None = None,
    passed_on: list[str] | None = None,
):
    """A command of a few options."""


tiny.command_options = CommandOptions(bare={"run": ""}, passes_on=("--model.",))


def test_the_words_become_the_functions_keyword_arguments():
    words = ["--kv-heads", "2", "--lengths", "3", "4", "--quiet", "--run", "--model.lr", "0.1"]
    assert parse_words("tiny", tiny, words) == (
        None,
        {
            "kv_heads": 2,
            "lengths": [3, 4],
            "quiet": True,
            "run": "",
            "passed_on": ["--model.lr", "0.1"],
        },
    )
    kwargs = parse_words("tiny", tiny, ["--lengths", "5", "--quiet", "false"])[1]
    assert (kwargs["lengths"], kwargs["quiet"], kwargs["run"]) == ([5], False, None)


def test_the_options_passed_on_and_the_words_after_a_double_dash_make_one_list():
    options = CommandOptions(passes_on=("--model.", "--data."))
    argv = ["--depths", "2", "--model.lr", "0.01", "--data.seq=8", "--seeds", "0", "--", "--x", "1"]
    assert split_passed_on(argv, options) == [
        "--depths", "2", "--seeds", "0",
        "--passed_on", json.dumps(["--model.lr", "0.01", "--data.seq=8", "--x", "1"]),
    ]  # fmt: skip
    assert split_passed_on(argv, CommandOptions()) == argv  # a command that passes none on
