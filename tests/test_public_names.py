"""Each package's public names (its ``from module import name as name`` lines, read by
``lit_sparse._lazy.reexported``) make its ``__all__``, and every one of them resolves."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = {
    "lit_sparse": 28,
    "lit_sparse.attention": 20,
    "lit_sparse.commands": 6,
    "lit_sparse.data": 7,
    "lit_sparse.evaluation": 13,
    "lit_sparse.formats": 4,
    "lit_sparse.generation": 13,
    "lit_sparse.interop": 2,
    "lit_sparse.interop.hf": 10,
    "lit_sparse.io": 7,
    "lit_sparse.kernels": 7,
    "lit_sparse.parsing": 3,
    "lit_sparse.runs": 23,
    "lit_sparse.tasks": 38,
}
"""package -> how many public names it has at least (a package whose source cannot be read
would list none)."""


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_all_lists_the_reexported_names_and_each_resolves(package):
    module = importlib.import_module(package)
    assert len(module.__all__) >= PACKAGES[package], module.__all__
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module)
