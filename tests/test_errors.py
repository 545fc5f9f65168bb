"""The error types and their helpers (lit_sparse/errors.py): a file's format checked in one
line, our error found behind a library's wrapping, and how a command ends on Ctrl-C."""

from __future__ import annotations

import itertools

import pytest

from lit_sparse.errors import (
    INTERRUPTED,
    CheckpointError,
    ConfigError,
    DamagedFileError,
    LitSparseError,
    check_format,
    error_chain,
    find_error,
    find_user_error,
    interrupted,
)


def test_a_wrong_or_missing_format_names_what_was_found_and_expected():
    check_format({"format": "table/1"}, "table/1", "a table")
    with pytest.raises(ConfigError, match=r"^not a table: format='run/2', expected 'table/1'$"):
        check_format({"format": "run/2"}, "table/1", "a table")
    with pytest.raises(DamagedFileError, match=r"^not a record: format=None, expected 'r/1'$"):
        check_format(["not", "a", "mapping"], "r/1", "a record", error=DamagedFileError)


def wrapped() -> RuntimeError:
    """A RuntimeError raised while handling a ValueError caused by a CheckpointError."""
    try:
        try:
            try:
                raise CheckpointError("no state_dict")
            except CheckpointError as inner:
                raise ValueError("loading failed") from inner
        except ValueError:
            raise RuntimeError("the trainer stopped") from None
    except RuntimeError as outer:
        return outer


def test_our_error_is_found_behind_a_librarys_wrapping():
    outer = wrapped()
    # from None hides the context from the traceback, not from __context__
    assert [type(e) for e in error_chain(outer)] == [RuntimeError, ValueError, CheckpointError]
    assert str(find_user_error(outer)) == "no state_dict"
    assert isinstance(find_error(outer, ValueError), ValueError)
    assert find_error(outer, KeyError) is None and find_user_error(None) is None


def test_a_chain_that_loops_is_read_once():
    first, second = ValueError("a"), KeyError("b")
    first.__cause__, second.__cause__ = second, first
    assert list(itertools.islice(error_chain(first), 5)) == [first, second]


def test_the_user_errors_are_also_the_builtin_kinds_callers_catch():
    assert issubclass(ConfigError, ValueError) and issubclass(ConfigError, LitSparseError)
    assert issubclass(DamagedFileError, ValueError)


def test_ctrl_c_ends_with_one_line_and_status_130(capsys):
    assert interrupted() == INTERRUPTED == 130
    assert interrupted("the run folder is kept") == 130
    assert capsys.readouterr().err == (
        "interrupted (Ctrl-C)\ninterrupted (Ctrl-C): the run folder is kept\n"
    )
