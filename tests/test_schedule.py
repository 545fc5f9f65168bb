"""The learning-rate schedule (lit_sparse/schedule.py): the paper's warmup and cosine, step for
step, and its edges."""

import math

import pytest

from lit_sparse.schedule import warmup_cosine


def paper_lr(p: int, lr=3e-4, warmup=300, total=13000) -> float:
    """The paper's train.py schedule at its step p (counted from 1), written out."""
    if p < warmup:
        return lr * p / max(1, warmup)
    progress = (p - warmup) / max(1, total - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def test_the_schedule_is_the_papers_step_for_step():
    """Our optimizer step s runs at the paper's step s + 1 (it counts from 1): the cosine
    starts at the same step, and the last of 13,000 steps trains at the floor."""
    for step in [*range(0, 305), 6649, 6650, *range(12990, 13000)]:
        assert 3e-4 * warmup_cosine(step, 300, 13000, 0.1) == pytest.approx(paper_lr(step + 1))


def test_the_multiplier_rises_linearly_then_falls_to_the_floor_and_stays():
    values = [warmup_cosine(step, 4, 10, 0.2) for step in range(14)]
    assert values[:4] == [0.25, 0.5, 0.75, 1.0]  # step 3 is the warmup's last, at 1
    assert all(a >= b for a, b in zip(values[3:], values[4:], strict=False))  # never rises
    assert values[9] == pytest.approx(0.2) and values[13] == pytest.approx(0.2)  # flat after
    # no warmup: step 0 is the paper's step 1, already one tenth down the cosine
    assert warmup_cosine(0, 0, 10, 0.1) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi / 10)))
    assert warmup_cosine(5, 1, 1, 0.1) == pytest.approx(0.1)  # max_steps == warmup: the floor
