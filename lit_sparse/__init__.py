"""lit_sparse: sparse causal attention for language models on PyTorch Lightning.

The public names import on first use (``lit_sparse.LanguageModel`` imports torch), so
``python -m lit_sparse --help`` and the commands that need no model start at once.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

from lit_sparse import _moved

_PUBLIC = {
    "AttentionPlugin": "lit_sparse.attention",
    "BigBirdAttention": "lit_sparse.attention",
    "DenseAttention": "lit_sparse.attention",
    "FibonacciAttention": "lit_sparse.attention",
    "SlidingWindowAttention": "lit_sparse.attention",
    "build_attention": "lit_sparse.attention",
    "list_attention": "lit_sparse.attention",
    "register_attention": "lit_sparse.attention",
    "ModelConfig": "lit_sparse.config",
    "generate": "lit_sparse.generation",
    "generate_text": "lit_sparse.generation",
    "score": "lit_sparse.generation",
    "Tokenizer": "lit_sparse.data.tokenizer",
    "load_pretrained": "lit_sparse.interop.sources",
    "LanguageModel": "lit_sparse.model",
    "load_run": "lit_sparse.runs.analysis",
}
"""public name -> the module it comes from."""

__all__ = [
    "AttentionPlugin",
    "BigBirdAttention",
    "DenseAttention",
    "FibonacciAttention",
    "LanguageModel",
    "ModelConfig",
    "SlidingWindowAttention",
    "Tokenizer",
    "build_attention",
    "generate",
    "generate_text",
    "list_attention",
    "load_pretrained",
    "load_run",
    "register_attention",
    "score",
]
__version__ = "0.1.0"

_moved.install()  # earlier versions' module paths (saved run configs name them)

if TYPE_CHECKING:
    from lit_sparse.attention import (
        AttentionPlugin,
        BigBirdAttention,
        DenseAttention,
        FibonacciAttention,
        SlidingWindowAttention,
        build_attention,
        list_attention,
        register_attention,
    )
    from lit_sparse.config import ModelConfig
    from lit_sparse.data.tokenizer import Tokenizer
    from lit_sparse.generation import generate, generate_text, score
    from lit_sparse.interop.sources import load_pretrained
    from lit_sparse.model import LanguageModel
    from lit_sparse.runs.analysis import load_run


def __getattr__(name: str):
    """A public name, imported now; a subpackage (``lit_sparse.data``) too."""
    if name in _PUBLIC:
        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'lit_sparse' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
