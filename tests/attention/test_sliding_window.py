"""The sliding window (lit_sparse/attention/sliding_window.py): distances 0..W, fewer when the
sequence is shorter, equal to the masked reference; a negative window is refused."""

from __future__ import annotations

import pytest
import torch

from lit_sparse.attention.sliding_window import SlidingWindowAttention
from lit_sparse.errors import ConfigError
from lit_sparse.kernels.reference import masked_attention


def test_a_query_reads_itself_and_the_window_before_it():
    pattern = SlidingWindowAttention(window=3).build(0, 2, 16)
    assert pattern.distances(16) == [0, 1, 2, 3]
    assert pattern.distances(3) == [0, 1, 2]  # a short sequence: no distance past its start
    assert SlidingWindowAttention(window=0).build(0, 2, 16).distances(16) == [0]
    assert pattern.slots(16, torch.device("cpu")).distances.tolist() == [0, 1, 2, 3]


def test_the_output_is_attention_over_a_causal_band():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 10, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    i = torch.arange(10)
    band = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] <= 3)
    pattern = SlidingWindowAttention(window=3).build(0, 1, 10)
    torch.testing.assert_close(pattern(q, k, v), masked_attention(q, k, v, band))


def test_a_negative_window_is_one_line():
    with pytest.raises(ConfigError, match=r"^window must be >= 0, got -1$"):
        SlidingWindowAttention(window=-1)


def test_the_bench_case_reads_as_many_keys_as_asked():
    [(name, plugin)] = SlidingWindowAttention.bench_cases(keys=12, window=99).items()
    assert name == "sliding_window" and plugin == SlidingWindowAttention(window=11)
