"""lit_sparse: sparse causal attention for language models on PyTorch Lightning."""

from .attention import (
    AttentionPlugin,
    BigBirdAttention,
    DenseAttention,
    FibonacciAttention,
    SlidingWindowAttention,
    build_attention,
    list_attention,
    register_attention,
)
from .config import ModelConfig
from .model import LanguageModel

__all__ = [
    "AttentionPlugin",
    "BigBirdAttention",
    "DenseAttention",
    "FibonacciAttention",
    "LanguageModel",
    "ModelConfig",
    "SlidingWindowAttention",
    "build_attention",
    "list_attention",
    "register_attention",
]
__version__ = "0.1.0"
