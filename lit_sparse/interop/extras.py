"""Optional extras: whether one is installed, and new enough, before it is imported (the
``hf`` extra: transformers). Each check raises one line saying what to install."""

from __future__ import annotations

import importlib.metadata

from lit_sparse.errors import MissingExtraError

__all__ = ["MIN_TRANSFORMERS", "MissingExtraError", "require_transformers"]

MIN_TRANSFORMERS = "4.56"
"""The oldest transformers the integration is tested with (.ci/minimum-versions): the first
whose ``Cache`` is a list of per-layer ``CacheLayerMixin`` objects and whose
``DynamicCache`` takes the model config."""

INSTALL = 'pip install "lit_sparse[hf]"'


def require_transformers(installed: str | None = None) -> str:
    """The installed transformers version; raises :class:`MissingExtraError` when it is
    missing or older than :data:`MIN_TRANSFORMERS` (``installed`` overrides the lookup)."""
    from packaging.version import Version

    if installed is None:
        try:
            installed = importlib.metadata.version("transformers")
        except importlib.metadata.PackageNotFoundError:
            raise MissingExtraError(
                "the Hugging Face transformers integration needs the `hf` extra, which is not "
                f"installed: {INSTALL} (transformers>={MIN_TRANSFORMERS})"
            ) from None
    if Version(installed) < Version(MIN_TRANSFORMERS):
        raise MissingExtraError(
            f"transformers {installed} is installed; lit_sparse's integration needs "
            f'transformers>={MIN_TRANSFORMERS}: pip install -U "transformers>={MIN_TRANSFORMERS}"'
        )
    return installed
