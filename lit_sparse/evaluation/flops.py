"""Forward and training FLOPs of the language model, sparse attention included.

Per predicted token, a multiply-add is 2 FLOPs, as torch's FlopCounterMode counts matrix
products (element-wise work is not counted); training is 3 x forward. Attention counts every key
slot a query computes: all T when dense, else one per distance plus any absolute keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn

from lit_sparse.attention import AttentionPattern, SlotPattern
from lit_sparse.config import ModelConfig


@dataclass(frozen=True)
class FlopsBreakdown:
    """FLOPs per token, by term (all layers summed)."""

    attention_scores: float
    """q . k for every key slot."""
    attention_mixing: float
    """The probability-weighted sum of values over every key slot."""
    projections: float
    """q, k, v and output projections."""
    mlp: float
    """SwiGLU gate, up and down."""
    lm_head: float
    """The tied output projection to the vocabulary."""

    @property
    def attention(self) -> float:
        return self.attention_scores + self.attention_mixing

    @property
    def total(self) -> float:
        return self.attention + self.projections + self.mlp + self.lm_head

    def scaled(self, factor: float) -> FlopsBreakdown:
        """Every term times ``factor`` (3 for forward + backward, tokens for a batch)."""
        return FlopsBreakdown(**{k: v * factor for k, v in asdict(self).items()})

    def as_dict(self) -> dict[str, float]:
        return {**asdict(self), "attention": self.attention, "total": self.total}


def forward_flops_per_token(config: ModelConfig, keys: Sequence[float]) -> FlopsBreakdown:
    """Forward FLOPs per token of ``config`` with ``keys[l]`` key slots per query in layer l."""
    if len(keys) != config.n_layers:
        raise ValueError(f"keys: expected one count per layer ({config.n_layers}), got {len(keys)}")
    d, h, kv, hd = config.d_model, config.n_heads, config.n_kv_heads, config.head_dim
    per_slot = 2 * h * hd  # one dot product (or one weighted value row) per query head
    return FlopsBreakdown(
        attention_scores=float(per_slot * sum(keys)),
        attention_mixing=float(per_slot * sum(keys)),
        projections=float(config.n_layers * 2 * d * (2 * h * hd + 2 * kv * hd)),
        mlp=float(config.n_layers * 2 * 3 * d * config.ffn_width),
        lm_head=float(2 * d * config.vocab_size),
    )


def pattern_keys(pattern: AttentionPattern, length: int) -> int:
    """Key slots per query the counter counts for ``pattern`` at ``length``."""
    count = len(pattern.distances(length))
    if isinstance(pattern, SlotPattern):
        # absolute keys (BigBird's global and random ones) are slots beyond the distances;
        # the base class's slots are static (a learned pattern's rungs are its distances)
        count += SlotPattern.slots(pattern, length, torch.device("cpu")).n_absolute
    return count


def keys_per_query(model: nn.Module, length: int | None = None) -> list[int]:
    """Key slots per query of every layer at ``length`` (default: the training length)."""
    model = getattr(model, "model", model)
    length = length or model.config.context_length
    with torch.no_grad():
        return [pattern_keys(p, length) for p in model.patterns]


def model_flops_per_token(model: nn.Module, length: int | None = None) -> FlopsBreakdown:
    """Forward FLOPs per token of ``model`` on sequences of ``length``."""
    inner = getattr(model, "model", model)
    return forward_flops_per_token(inner.config, keys_per_query(inner, length))


def flops_per_batch(model: nn.Module, batch_size: int, length: int, training: bool = True) -> int:
    """FLOPs of one (batch_size, length) batch: forward + backward (3x) when ``training``."""
    per_token = model_flops_per_token(model, length).total
    return int(round(per_token * batch_size * length * (3 if training else 1)))
