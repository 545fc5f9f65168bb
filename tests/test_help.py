"""``--help`` as a new user meets it (issue 25, items 14 and 15): the top-level help starts
without torch, a Lightning command's help is the short one (``--help=full``: LightningCLI's
every option), usage says ``python -m lit_sparse``, no help shows reST markup, and generate
shows its defaults."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from lit_sparse.__main__ import main
from lit_sparse.commands import COMMANDS

REST = ("``", ":func:", ":mod:", ":class:", ":meth:", "`_")


def help_of(capsys, *args: str) -> str:
    """A command's --help: argparse exits 0; a command that hands --help on to another
    program's parser (lm-eval) returns its status instead."""
    try:
        code = main([*args, "--help"] if "--help=full" not in args else list(args))
    except SystemExit as exit_info:
        code = exit_info.code
    assert code in (0, None)
    return capsys.readouterr().out


@pytest.mark.slow
def test_the_top_level_help_needs_no_torch():
    code = (
        "import sys, runpy\n"
        "sys.argv = ['lit_sparse', '--help']\n"
        "try:\n    runpy.run_module('lit_sparse', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'lightning' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "usage: python -m lit_sparse <command>" in done.stdout
    assert done.stdout.strip().endswith("False False"), done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("command", ["fit", "validate", "test", "extrapolate"])
def test_a_lightning_command_prints_the_short_help(capsys, command):
    text = help_of(capsys, command)
    assert text.startswith(f"usage: python -m lit_sparse {command} [-c CONFIG]")
    assert "__main__.py" not in text and not any(mark in text for mark in REST)
    assert len(text.splitlines()) < 150  # LightningCLI's help: about 575 lines
    for option in ("--model.attention", "--model.lr", "--model.arch.n_layers", "--data"):
        assert f"  {option} " in text
    assert "Transformer blocks L." in " ".join(text.split())  # a field's docstring (ModelConfig)
    for option in ("--trainer.devices", "--trainer.max_steps", "--trainer.precision"):
        assert f"  {option} " in text
    assert "--trainer.max_epochs" not in text and "--trainer.barebones" not in text
    assert "--help=full lists all" in text
    if command == "extrapolate":
        assert "  --lengths " in text and "  --new_offsets " in text


@pytest.mark.slow
def test_list_options_show_the_space_separated_form_they_take(capsys):
    """Issue 47: ``fit --help`` showed ``--model.betas [ITEM,...]`` (and extrapolate
    ``--lengths LENGTHS, --lengths+ LENGTHS``) where the README says lists are
    space-separated, as the command line takes them."""
    fit = help_of(capsys, "fit")
    assert "  --model.betas BETAS [BETAS ...]" in fit and "[ITEM,...]" not in fit
    extrapolate = help_of(capsys, "extrapolate")
    assert "  --lengths LENGTHS [LENGTHS ...]" in extrapolate and "--lengths+" not in extrapolate


@pytest.mark.slow
def test_help_full_is_every_option(capsys):
    text = help_of(capsys, "fit", "--help=full")
    assert text.startswith("usage: python -m lit_sparse [options] fit")
    assert "--trainer.max_epochs" in text and "--trainer.barebones" in text
    assert len(text.splitlines()) > 400 and not any(mark in text for mark in REST)


@pytest.mark.parametrize("command", COMMANDS.names())
def test_the_project_commands_help_is_plain_text(capsys, command):
    text = help_of(capsys, command)
    assert text.startswith(f"usage: python -m lit_sparse {command}")
    assert not any(mark in text for mark in REST), text


def test_generate_shows_its_defaults(capsys):
    text = " ".join(help_of(capsys, "generate").split())
    assert "tokens to generate (default: 100)" in text
    assert "sample among the k most likely tokens (default: all of them)" in text
    # issue 47: without a seed each call samples differently, and the help said nothing
    assert "(default: none, a random seed: each call samples other text)" in text


def test_every_bench_option_says_what_it_does():
    from lit_sparse.commands._dispatch import build_parser

    parser = build_parser("bench", COMMANDS.find("bench")[0])
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    missing = [
        f"bench {name} {action.option_strings[-1]}"
        for name, parser in sub.choices.items()
        for action in parser._actions
        if action.option_strings and not action.help
    ]
    assert not missing, missing
