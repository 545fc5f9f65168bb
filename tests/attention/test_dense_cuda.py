"""Dense attention on a CUDA GPU: GQA never falls back to SDPA's math kernel, whose [T, T]
scores run out of memory at long lengths. Skipped without CUDA (CI has none)."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from lit_sparse import build_attention

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

FUSED = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_dense_gqa_runs_on_a_fused_kernel_and_matches_the_reference(dtype):
    length = 300
    pattern = build_attention("dense", backend="sdpa").build(0, 1, length)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, length, 64, generator=gen).to("cuda", dtype)
    k, v = (torch.randn(2, 2, length, 64, generator=gen).to("cuda", dtype) for _ in "kv")
    with sdpa_kernel(FUSED):  # the math kernel is not allowed: it raises if it were chosen
        got = pattern(q, k, v)
    want = pattern.reference(q.float(), k.float(), v.float())
    tolerance = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), want, atol=tolerance, rtol=tolerance)
