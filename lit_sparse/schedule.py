"""The learning-rate schedule: the paper's linear warmup, then a cosine to a floor."""

from __future__ import annotations

import math


def warmup_cosine(step: int, warmup_steps: int, max_steps: int, min_lr_ratio: float) -> float:
    """LR multiplier at 0-based ``step``; the paper's schedule at its step p = step + 1: linear
    warmup p / warmup_steps, then a cosine from 1 to ``min_lr_ratio`` at ``max_steps``, flat
    after (step 0 trains at 1/warmup, not 0)."""
    p = step + 1
    if p < warmup_steps:
        return p / warmup_steps
    progress = min(1.0, (p - warmup_steps) / max(1, max_steps - warmup_steps))
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
