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
from lit_sparse.generation import generate
from lit_sparse.model import LanguageModel

__all__ = [
    "AttentionPlugin",
    "BigBirdAttention",
    "DenseAttention",
    "FibonacciAttention",
    "LanguageModel",
    "ModelConfig",
    "SlidingWindowAttention",
    "build_attention",
    "generate",
    "list_attention",
    "load_run",
    "register_attention",
]

__version__ = "0.1.0"

_moved.install()  # earlier versions' module paths (saved run configs name them)


def __getattr__(name: str):
    # load_run needs Lightning: imported on first use, so `import lit_sparse` stays light
    if name == "load_run":
        from lit_sparse.runs.analysis import load_run

        return load_run
    raise AttributeError(f"module 'lit_sparse' has no attribute {name!r}")
