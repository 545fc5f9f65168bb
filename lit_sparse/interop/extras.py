"""Optional extras: whether one is installed, and new enough, before it is imported (the
``hf`` extra: transformers; ``gguf``: the GGUF writer; ``llama-cpp``: llama-cpp-python and
the writer). Each check raises one line saying what to install."""

from __future__ import annotations

import importlib.metadata

from lit_sparse.errors import MissingExtraError

__all__ = [
    "MIN_GGUF",
    "MIN_LLAMA_CPP",
    "MIN_TRANSFORMERS",
    "MissingExtraError",
    "require_gguf",
    "require_llama_cpp",
    "require_transformers",
]

MIN_TRANSFORMERS = "4.56"
"""The oldest transformers the integration is tested with (.ci/minimum-versions): the first
whose ``Cache`` is a list of per-layer ``CacheLayerMixin`` objects and whose
``DynamicCache`` takes the model config."""

MIN_GGUF = "0.19"
"""The gguf package the GGUF export is tested with (``export --format gguf``)."""
MIN_LLAMA_CPP = "0.3.36"
"""The llama-cpp-python ``bench decode --llama-cpp`` is tested with (it builds llama.cpp from
source: many minutes on one core)."""


def require_transformers(installed: str | None = None) -> str:
    """The installed transformers version; raises :class:`MissingExtraError` when it is
    missing or older than :data:`MIN_TRANSFORMERS` (``installed`` overrides the lookup)."""
    purpose = "the Hugging Face transformers integration"
    upgrade = f"transformers>={MIN_TRANSFORMERS}"
    return _require("transformers", MIN_TRANSFORMERS, "hf", purpose, installed, upgrade)


def _require(
    distribution: str,
    minimum: str,
    extra: str,
    purpose: str,
    installed: str | None = None,
    upgrade: str | None = None,
) -> str:
    """The installed version of ``distribution``; one MissingExtraError line naming ``extra``
    when it is missing, or what to upgrade (``upgrade``, default: the extra) when it is older
    than ``minimum``."""
    from packaging.version import Version

    if installed is None:
        try:
            installed = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            raise MissingExtraError(
                f"{purpose} needs the `{extra}` extra, which is not installed: "
                f'pip install "lit_sparse[{extra}]" ({distribution}>={minimum})'
            ) from None
    if Version(installed) < Version(minimum):
        raise MissingExtraError(
            f"{distribution} {installed} is installed; {purpose} needs {distribution}>={minimum}: "
            f'pip install -U "{upgrade or f"lit_sparse[{extra}]"}"'
        )
    return installed


def require_gguf(installed: str | None = None) -> str:
    """The installed gguf version (the GGUF writer); raises :class:`MissingExtraError` when
    it is missing or older than :data:`MIN_GGUF`."""
    return _require("gguf", MIN_GGUF, "gguf", "GGUF export (--format gguf)", installed)


def require_llama_cpp(installed: str | None = None) -> str:
    """The installed llama-cpp-python version (and the gguf writer it is given files by);
    raises :class:`MissingExtraError` when either is missing or too old."""
    purpose = "timing llama.cpp (--llama-cpp)"
    version = _require("llama-cpp-python", MIN_LLAMA_CPP, "llama-cpp", purpose, installed)
    _require("gguf", MIN_GGUF, "llama-cpp", purpose)
    return version
