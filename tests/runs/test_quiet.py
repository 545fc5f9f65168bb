"""The filters for the lines every Lightning command would print (lit_sparse/runs/quiet.py):
Lightning's tips, torch's LeafSpec deprecation, ModelCheckpoint's dirpath note; the rest
still shows."""

from __future__ import annotations

import logging
import warnings

import pytest

from lit_sparse.runs.quiet import _RANK_ZERO_LOGGERS, quiet_evaluation, quiet_lightning


@pytest.fixture
def quiet():
    """quiet_lightning's filters for one test: the warning filters and loggers restored after."""
    before = {name: list(logging.getLogger(name).filters) for name in _RANK_ZERO_LOGGERS}
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        quiet_lightning()
        yield
    for name, filters in before.items():
        logging.getLogger(name).filters[:] = filters


def passes(logger_name: str, message: str) -> bool:
    record = logging.LogRecord(logger_name, logging.INFO, __file__, 1, message, None, None)
    return logging.getLogger(logger_name).filter(record)


def test_tips_are_dropped_and_other_lines_kept(quiet):
    for name in _RANK_ZERO_LOGGERS:
        assert not passes(name, "💡 Tip: For seamless cloud uploads, try installing litmodels")
        assert passes(name, "GPU available: False, used: False")


def test_the_leafspec_deprecation_is_filtered_and_other_warnings_shown(quiet):
    with warnings.catch_warnings(record=True) as shown:
        warnings.warn(
            "`isinstance(treespec, LeafSpec)` is deprecated, use ...", FutureWarning, stacklevel=1
        )
        warnings.warn("another deprecation", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == ["another deprecation"]


def test_an_evaluation_also_filters_the_dirpath_note():
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        quiet_evaluation()
        warnings.warn("The dirpath has changed from 'a' to 'b'", UserWarning, stacklevel=1)
        warnings.warn("The dirpath is not empty", UserWarning, stacklevel=1)
    assert [str(w.message) for w in shown] == ["The dirpath is not empty"]
