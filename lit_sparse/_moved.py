"""Old module paths (named by saved run configs and notebooks) importable until
:data:`REMOVED_IN` with a FutureWarning; each is the module at its new home."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

REMOVED_IN = "0.3.0"
"""The lit_sparse version without the old paths."""

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
    "lit_sparse.attention.kernels.compiled": "lit_sparse.kernels.compiled",
    "lit_sparse.attention.kernels.csr": "lit_sparse.kernels.csr",
    "lit_sparse.attention.kernels.gather": "lit_sparse.kernels.gather",
    "lit_sparse.attention.kernels.huge_pages": "lit_sparse.kernels.huge_pages",
    "lit_sparse.attention.kernels.mixed_linear": "lit_sparse.kernels.mixed_linear",
    "lit_sparse.attention.kernels.reference": "lit_sparse.kernels.reference",
    "lit_sparse.attention.kernels.self_check": "lit_sparse.kernels.self_check",
    "lit_sparse.attention.kernels.slots": "lit_sparse.kernels.slots",
    "lit_sparse.attention.kernels.triton_kernel": "lit_sparse.kernels.triton_kernel",
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
