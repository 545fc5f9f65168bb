"""Attention plugins: a registry of named patterns sharing the model's projections and RoPE
(built-ins here with ``@register_attention``, packages by ``lit_sparse.attention`` entry points)."""

from lit_sparse.attention.base import AttentionPattern, AttentionPlugin, SlotPattern
from lit_sparse.attention.bigbird import BigBirdAttention
from lit_sparse.attention.dense import DenseAttention
from lit_sparse.attention.fibonacci import FibonacciAttention
from lit_sparse.attention.registry import (
    build_attention,
    get_attention,
    list_attention,
    register_attention,
)
from lit_sparse.attention.sliding_window import SlidingWindowAttention

__all__ = [
    "AttentionPattern",
    "AttentionPlugin",
    "BigBirdAttention",
    "DenseAttention",
    "FibonacciAttention",
    "SlidingWindowAttention",
    "SlotPattern",
    "build_attention",
    "get_attention",
    "list_attention",
    "register_attention",
]
