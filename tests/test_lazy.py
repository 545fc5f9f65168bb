"""Public names imported on first use (lit_sparse/_lazy.py): ``reexported`` reads a package's
``from module import name as name`` lines (top level and ``TYPE_CHECKING`` block), and
``lazy_names``'s ``__getattr__`` imports a name when first asked for, keeps it, and names an
unknown one. Every package's ``__all__``: tests/test_public_names.py."""

from __future__ import annotations

import sys

import pytest

from lit_sparse._lazy import lazy_names, reexported

PACKAGE = """
from typing import TYPE_CHECKING

from lazypkg.eager import near as near
from lazypkg.eager import helper

if TYPE_CHECKING:
    from lazypkg.late import far as far

from lit_sparse._lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {"extra": "lazypkg.late"}, subpackages=True)
"""


@pytest.fixture
def lazypkg(tmp_path, monkeypatch):
    """A package ``lazypkg``: ``near`` re-exported, ``far`` and ``extra`` imported on first use
    from ``lazypkg.late``, and a submodule ``sub``."""
    root = tmp_path / "lazypkg"
    root.mkdir()
    (root / "__init__.py").write_text(PACKAGE)
    (root / "eager.py").write_text("near = 'near'\nhelper = 'not public'\n")
    (root / "late.py").write_text("far = 'far'\nextra = 'extra'\n")
    (root / "sub.py").write_text("")
    (root / "_sub.py").write_text("")  # private: never an attribute
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [n for n in sys.modules if n == "lazypkg" or n.startswith("lazypkg.")]:
        del sys.modules[name]


def test_an_unknown_name_is_an_attribute_error_naming_it():
    import lit_sparse

    with pytest.raises(AttributeError, match="'lit_sparse' has no attribute 'nothing_here'"):
        lit_sparse.nothing_here  # noqa: B018


def test_the_reexported_names_are_all_and_import_on_first_use(lazypkg):
    import lazypkg

    assert reexported("lazypkg") == {"near": "lazypkg.eager", "far": "lazypkg.late"}
    assert lazypkg.__all__ == ["extra", "far", "near"]  # helper: no `as helper`, not public
    assert "lazypkg.late" not in sys.modules and "far" not in vars(lazypkg)
    assert (lazypkg.far, lazypkg.extra) == ("far", "extra")
    assert vars(lazypkg)["far"] == "far"  # kept: the next lookup is a plain attribute
    assert {"far", "extra", "near"} <= set(dir(lazypkg))
    assert lazypkg.sub is sys.modules["lazypkg.sub"]  # subpackages=True: a submodule


def test_unknown_and_private_names_are_attribute_errors(lazypkg):
    import lazypkg

    with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'nothing'"):
        lazypkg.nothing  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute '_sub'"):
        lazypkg._sub  # noqa: B018  # a private name is never a submodule
    _, _, public = lazy_names("lazypkg")
    assert public == ["far", "near"]  # without `more`
