"""Choosing the next token from logits: greedy at temperature 0, else sampling with an
optional top-k and nucleus (top-p) cut, reproducible with a seed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from lit_sparse.errors import ConfigError


@dataclass(frozen=True)
class Sampler:
    """How a next token is chosen; bad values are refused in one line naming the field."""

    temperature: float = 1.0
    """0: greedy (the most likely token; deterministic); > 0: sample from softmax(logits / T)."""
    top_k: int | None = None
    """Sample among the k most likely tokens only (None: all)."""
    top_p: float | None = None
    """Sample among the most likely tokens whose probabilities add up to top_p (nucleus
    sampling; the most likely token always stays), in (0, 1]; None: all."""
    seed: int | None = None
    """Seed of the sampling generator: the same seed, model and prompt give the same tokens
    (None: torch's global generator)."""

    def __post_init__(self):
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (0 <= t < math.inf):
            raise ConfigError(f"temperature={t!r}: must be a number >= 0 (0 is greedy)")
        k = self.top_k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ConfigError(f"top_k={k!r}: must be an integer >= 1, or None for all tokens")
        p = self.top_p
        if p is not None and (isinstance(p, bool) or not isinstance(p, (int, float))):
            raise ConfigError(f"top_p={p!r}: must be a number in (0, 1], or None")
        if p is not None and not (0 < p <= 1):
            raise ConfigError(f"top_p={p!r}: must be in (0, 1]")
        s = self.seed
        if s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 0):
            raise ConfigError(f"seed={s!r}: must be an integer >= 0, or None")

    def generator(self, device: torch.device) -> torch.Generator | None:
        """A generator seeded with ``seed`` on ``device`` (None without a seed)."""
        if self.seed is None or self.temperature == 0:
            return None
        return torch.Generator(device=device).manual_seed(self.seed)

    def __call__(self, logits: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """The next token (B,) of each row of ``logits`` (B, V)."""
        if self.temperature == 0:
            return logits.argmax(dim=-1)
        logits = logits.float() / self.temperature
        if self.top_k is not None and self.top_k < logits.shape[-1]:
            kth = torch.topk(logits, self.top_k, dim=-1).values[..., -1:]  # (B, 1)
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p is not None and self.top_p < 1:
            ordered, order = torch.sort(logits, dim=-1, descending=True)
            probs = torch.softmax(ordered, dim=-1)
            before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
            ordered = ordered.masked_fill(before >= self.top_p, float("-inf"))
            logits = torch.full_like(logits, float("-inf")).scatter(-1, order, ordered)
        probs = torch.softmax(logits, dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
