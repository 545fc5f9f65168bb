"""The commands' argument parser (lit_sparse.parsing.arguments)."""

from __future__ import annotations

import sys

import pytest

from lit_sparse.cli import main
from lit_sparse.parsing.arguments import LitSparseArgumentParser


def test_a_parser_without_a_program_name_says_python_m_lit_sparse(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/somewhere/lit_sparse/__main__.py"])
    assert LitSparseArgumentParser().prog == "python -m lit_sparse"
    assert LitSparseArgumentParser(prog="python -m lit_sparse fit").prog.endswith(" fit")


def test_a_plugins_help_starts_with_the_command_that_runs_it(monkeypatch, capsys):
    """Issue 57: ``fit --model.attention fibonacci --model.attention.help fibonacci`` printed
    ``usage: __main__.py`` (jsonargparse's parser for the class had no program name)."""
    monkeypatch.setattr(sys, "argv", ["/somewhere/lit_sparse/__main__.py"])
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--model.attention", "fibonacci", "--model.attention.help", "fibonacci"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m lit_sparse [--model.attention.window"), out[:200]
