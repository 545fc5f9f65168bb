"""``--help`` text as a terminal shows it (lit_sparse/parsing/help_text.py): reST markup
removed from help and descriptions, and only the defaults worth showing."""

from __future__ import annotations

import argparse

from lit_sparse.parsing.help_text import HelpFormatter, plain


def test_plain_removes_rest_markup():
    text = (
        "Loads a run (:func:`lit_sparse.load_run`, :mod:`~lit_sparse.tasks.probe`), "
        "``--hops 2``; see `the notes <https://example.org/x>`_."
    )
    assert plain(text) == "Loads a run (lit_sparse.load_run, probe), --hops 2; see the notes."


def test_the_formatter_shows_defaults_worth_showing(capsys):
    parser = argparse.ArgumentParser(prog="p", formatter_class=HelpFormatter)
    parser.add_argument("--tokens", type=int, default=100, help="tokens to make")
    parser.add_argument("--zero", type=int, default=0, help="a zero")
    parser.add_argument("--top_k", type=int, default=None, help="k (default: all)")
    parser.add_argument("--flag", action="store_true", help="a switch")
    text = " ".join(parser.format_help().split())
    assert "tokens to make (default: 100)" in text and "a zero (default: 0)" in text
    assert "k (default: all)" in text and "(default: None)" not in text
    assert "a switch (default" not in text


def test_the_description_and_a_help_that_names_its_default_are_plain_text():
    parser = argparse.ArgumentParser(
        prog="p",
        description="Reads ``run_dir`` (:class:`~a.b.Run`).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--steps", type=int, default=5, help="``steps`` to run (default: five)")
    text = " ".join(parser.format_help().split())
    assert "Reads run_dir (Run)." in text
    assert "steps to run (default: five)" in text and "(default: 5)" not in text
