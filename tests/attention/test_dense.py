"""Dense causal attention on the CPU (lit_sparse/attention/dense.py): SDPA with grouped heads
equals the masked reference, a backend name is one of its choices, and ``flash`` without
flash-attn's tensors is refused, not run as SDPA. The CUDA kernels: test_dense_cuda.py."""

from __future__ import annotations

import pytest
import torch

from lit_sparse.attention.dense import DenseAttention, causal_sdpa, flash_usable, sdpa_takes_gqa
from lit_sparse.errors import ConfigError
from lit_sparse.testing import qkv


@pytest.mark.parametrize("backend", ["auto", "sdpa"])
def test_grouped_heads_on_the_cpu_equal_the_masked_reference(backend):
    q, k, v = qkv(9, dtype=torch.float64)
    pattern = DenseAttention(backend=backend).build(0, 1, 9)
    assert not flash_usable(q) and sdpa_takes_gqa(q)  # no K/V repeat on the CPU
    torch.testing.assert_close(pattern(q, k, v), pattern.reference(q, k, v))
    torch.testing.assert_close(causal_sdpa(q, k, v), pattern.reference(q, k, v))
    assert pattern.distances(4) == [0, 1, 2, 3]


def test_flash_without_flash_attn_tensors_is_refused():
    pattern = DenseAttention(backend="flash").build(0, 1, 9)
    with pytest.raises(RuntimeError, match="dense backend 'flash' needs flash-attn and CUDA"):
        pattern(*qkv(9))


def test_a_backend_is_one_of_its_choices():
    with pytest.raises(ConfigError, match=r"^backend must be one of 'auto', 'sdpa', 'flash', got"):
        DenseAttention(backend="xformers")
