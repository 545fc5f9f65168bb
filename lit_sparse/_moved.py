"""Module paths of earlier versions keep importing, with a DeprecationWarning.

Run folders saved before the package was grouped into layers name
``lit_sparse.checkpoints.AtomicCheckpointIO`` in their config.yaml, and notebooks import
``lit_sparse.analysis``; each old path is the module at its new home, the same objects.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "lit_sparse.analysis": "lit_sparse.runs.analysis",
    "lit_sparse.atomic_files": "lit_sparse.io.atomic",
    "lit_sparse.checkpoints": "lit_sparse.runs.checkpoints",
    "lit_sparse.config_files": "lit_sparse.parsing.config_files",
    "lit_sparse.export": "lit_sparse.interop.export",
    "lit_sparse.generation.decode_bench": "lit_sparse.bench.decode",
    "lit_sparse.generation.sources": "lit_sparse.interop.sources",
    "lit_sparse.list_options": "lit_sparse.parsing.list_options",
    "lit_sparse.pretrained": "lit_sparse.io.pretrained",
    "lit_sparse.resume": "lit_sparse.runs.resume",
    "lit_sparse.resumed_validation": "lit_sparse.runs.resumed_validation",
    "lit_sparse.tables": "lit_sparse.io.tables",
}
"""old module path -> where it lives now."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        warnings.warn(
            f"{spec.name} moved to {MOVED[spec.name]}; the old path will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module) -> None:
        """The module at its new home is already executed."""


def install() -> None:
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
