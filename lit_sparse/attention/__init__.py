"""Attention plugins: a registry of named patterns sharing the model's projections and RoPE
(built-ins here with ``@register_attention``, packages by ``lit_sparse.attention`` entry points)."""

from lit_sparse._lazy import reexported
from lit_sparse.attention.base import AttentionPattern as AttentionPattern
from lit_sparse.attention.base import AttentionPlugin as AttentionPlugin
from lit_sparse.attention.base import SlotPattern as SlotPattern
from lit_sparse.attention.bigbird import BigBirdAttention as BigBirdAttention
from lit_sparse.attention.dense import DenseAttention as DenseAttention
from lit_sparse.attention.fibonacci import FibonacciAttention as FibonacciAttention
from lit_sparse.attention.hybrid import HybridAttention as HybridAttention
from lit_sparse.attention.offsets import composed_reach as composed_reach
from lit_sparse.attention.offsets import fibonacci_rungs as fibonacci_rungs
from lit_sparse.attention.offsets import layer_distances as layer_distances
from lit_sparse.attention.offsets import union_distances as union_distances
from lit_sparse.attention.registry import all_bench_cases as all_bench_cases
from lit_sparse.attention.registry import build_attention as build_attention
from lit_sparse.attention.registry import get_attention as get_attention
from lit_sparse.attention.registry import list_attention as list_attention
from lit_sparse.attention.registry import register_attention as register_attention
from lit_sparse.attention.registry import resolve_attention as resolve_attention
from lit_sparse.attention.schedules import Custom as Custom
from lit_sparse.attention.schedules import to_schedule as to_schedule
from lit_sparse.attention.sliding_window import SlidingWindowAttention as SlidingWindowAttention

__all__ = sorted(reexported(__name__))
