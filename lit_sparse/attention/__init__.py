"""Attention plugins: a registry of named patterns sharing the model's projections and RoPE.

The built-in plugins are imported explicitly below, which registers them.
"""

from .base import AttentionPattern, AttentionPlugin, SlotPattern
from .bigbird import BigBirdAttention
from .dense import DenseAttention
from .fibonacci import FibonacciAttention
from .registry import build_attention, get_attention, list_attention, register_attention
from .sliding_window import SlidingWindowAttention

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
