"""One checkout per process. An editable install (``pip install -e .``) maps
``lit_sparse.callbacks`` and ``lit_sparse_studies`` to its own checkout's ``callbacks/`` and
``studies/`` folders, while ``lit_sparse`` itself may be found first in the working
directory: a second checkout (a git worktree pinned for a study, say) run with the first
one's virtual environment would silently mix the two commits' code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

INSTALLED_BESIDE = ("lit_sparse.callbacks", "lit_sparse_studies")
"""The packages an install maps from folders of their own, beside ``lit_sparse/``."""


def require_one_checkout(core: Path) -> None:
    """Raise ImportError when a package of :data:`INSTALLED_BESIDE` would come from another
    checkout or install than ``core`` (the ``lit_sparse/`` folder being imported): in a
    checkout it sits beside ``core``; in an installed wheel inside or beside it."""
    for name in INSTALLED_BESIDE:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        here = Path(spec.origin).resolve().parent
        if here.parent not in (core, core.parent):
            raise ImportError(
                f"{name} would come from {here} but lit_sparse from {core}: two checkouts in "
                "one process (an editable install of one, run from the other: a git worktree "
                "with the main checkout's virtual environment, say). Install this checkout "
                "into a virtual environment of its own (pip install -e .) and run it with that."
            )
