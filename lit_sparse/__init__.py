"""lit_sparse: sparse causal attention for language models on PyTorch Lightning."""

from lit_sparse import _moved
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
from lit_sparse.generation import generate, generate_text, score
from lit_sparse.model import LanguageModel

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


# imported on first use, so `import lit_sparse` stays light (load_run needs Lightning, the
# tokenizer and loading need the data layer)
_LAZY = {
    "load_run": "lit_sparse.runs.analysis",
    "load_pretrained": "lit_sparse.interop.sources",
    "Tokenizer": "lit_sparse.data.tokenizer",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lit_sparse' has no attribute {name!r}")
