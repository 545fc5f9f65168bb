"""lit_sparse: sparse causal attention for language models on PyTorch Lightning."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_sparse import _moved
from lit_sparse._lazy import lazy_names

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
    "load_pretrained": "lit_sparse.interop.loading",
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
    from lit_sparse.interop.loading import load_pretrained
    from lit_sparse.model import LanguageModel
    from lit_sparse.runs.analysis import load_run


__getattr__, __dir__ = lazy_names(__name__, _PUBLIC, subpackages=True)
