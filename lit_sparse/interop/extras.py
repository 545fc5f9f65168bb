"""Optional extras (``hf``, ``gguf``, ``llama-cpp``): checked installed and new enough before
import, with one line saying what to install."""

from __future__ import annotations

import importlib.metadata

from lit_sparse.errors import MissingExtraError

MIN_TRANSFORMERS = "4.56"
"""The oldest transformers tested (.ci/minimum-versions): per-layer ``CacheLayerMixin`` caches."""

MIN_GGUF = "0.19"
"""The gguf package the GGUF export is tested with (``export --format gguf``)."""
MIN_LLAMA_CPP = "0.3.36"
"""The llama-cpp-python ``bench decode --llama-cpp`` is tested with."""


def require_transformers(installed: str | None = None) -> str:
    """The installed transformers version, else MissingExtraError (missing or too old)."""
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
    """The installed version of ``distribution``, else MissingExtraError (missing or too old)."""
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
    """The installed gguf version, else MissingExtraError (missing or too old)."""
    return _require("gguf", MIN_GGUF, "gguf", "GGUF export (--format gguf)", installed)


def require_llama_cpp(installed: str | None = None) -> str:
    """The installed llama-cpp-python version (and gguf's), else MissingExtraError."""
    purpose = "timing llama.cpp (--llama-cpp)"
    version = _require("llama-cpp-python", MIN_LLAMA_CPP, "llama-cpp", purpose, installed)
    _require("gguf", MIN_GGUF, "llama-cpp", purpose)
    return version
