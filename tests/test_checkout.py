"""One checkout per process (lit_sparse/_checkout.py): the packages an install maps from
folders beside ``lit_sparse/`` (``lit_sparse.callbacks``, ``lit_sparse_studies``) must come
from the checkout (or wheel) ``lit_sparse`` is imported from; another one is one ImportError
naming both folders."""

from __future__ import annotations

from pathlib import Path

import pytest

import lit_sparse
from lit_sparse._checkout import INSTALLED_BESIDE, require_one_checkout

CORE = Path(lit_sparse.__file__).resolve().parent


def test_this_checkouts_packages_pass():
    assert INSTALLED_BESIDE == ("lit_sparse.callbacks", "lit_sparse_studies")
    require_one_checkout(CORE)  # callbacks/ and studies/ beside lit_sparse/
    # a wheel's layout: the packages inside the lit_sparse/ folder (here: its parent as core)
    require_one_checkout(CORE.parent)


def test_another_checkouts_core_is_one_import_error_naming_both(tmp_path):
    other = tmp_path / "worktree" / "lit_sparse"
    with pytest.raises(ImportError) as caught:
        require_one_checkout(other)
    message = str(caught.value)
    assert message.startswith(f"lit_sparse.callbacks would come from {CORE.parent / 'callbacks'}")
    assert f"but lit_sparse from {other}: two checkouts in one process" in message
    assert "(pip install -e .)" in message
