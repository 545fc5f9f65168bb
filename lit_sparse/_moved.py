"""Old module paths (saved configs name them), importable with a FutureWarning until REMOVED_IN."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

REMOVED_IN = "0.3.0"
"""The lit_sparse version without the old paths."""

_KERNELS = "compiled csr gather huge_pages mixed_linear reference self_check slots triton_kernel"
MOVED = {
    "lit_sparse.analysis": "lit_sparse.runs.analysis",
    "lit_sparse.checkpoints": "lit_sparse.runs.checkpoints",
    "lit_sparse.data.recall": "lit_sparse.tasks",
    "lit_sparse.data.recall_data": "lit_sparse.tasks",
    "lit_sparse.evaluation.lego": "lit_sparse.tasks.lego",
    "lit_sparse.evaluation.ruler": "lit_sparse.tasks.ruler",
    "lit_sparse.interop.sources": "lit_sparse.interop.loading",
    "lit_sparse.data.probe": "lit_sparse.tasks.probe",
    "lit_sparse.attention.kernels": "lit_sparse.kernels",
    **{
        f"lit_sparse.attention.kernels.{name}": f"lit_sparse.kernels.{name}"
        for name in _KERNELS.split()
    },
}
"""old module path -> where it lives now."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        warnings.warn(
            f"{spec.name} moved to {MOVED[spec.name]}; the old path will be removed in "
            f"lit_sparse {REMOVED_IN} (a saved config.yaml: write the new path there)",
            FutureWarning,
            stacklevel=2,
        )
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module) -> None:
        """The module at its new home is already executed."""


def install() -> None:
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedModules())  # before the path finder: a moved package's
        # submodule must be its new home's module, not a second copy found on its __path__
