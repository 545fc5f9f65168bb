"""Leaving lit_sparse: a run's model exported (a folder or a GGUF file), any saved model loaded
back, and the transformers and lm-eval integrations.

Public names (imported on first use): ``require_transformers`` and ``require_llama_cpp`` (an
optional extra imports, or one line saying what to install); the transformers classes are
``lit_sparse.interop.hf``'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse._lazy import lazy_names

if TYPE_CHECKING:
    from lit_sparse.interop.extras import require_llama_cpp as require_llama_cpp
    from lit_sparse.interop.extras import require_transformers as require_transformers

__getattr__, __dir__, __all__ = lazy_names(__name__)
