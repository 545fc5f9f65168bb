"""The Triton kernel on a CUDA GPU: the interpreter test's cases in float32 and bfloat16,
its first-use self-check's problem in each dtype it serves, and the learned-alpha plugin at
a model's shape through ``sparse_attention``'s dispatch.

Skipped without CUDA (CI has none); ``python -m lit_sparse bench gpu`` runs it on a GPU machine.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from .triton_cases import CASES, compare

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed"),
]

TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}
"""Of max |error| / (1 + max |reference|); bfloat16 keeps 8 bits of mantissa."""


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("block", [16, 32, 64])
def test_triton_kernel_matches_reference_on_the_gpu(block, dtype):
    cases = [dict(case, seed=i, block=block) for i, case in enumerate(CASES)]
    errors = compare(cases, "cuda", dtype)
    assert len(errors) >= 4 * len(cases)
    bad = [e for e in errors if not e["err"] < TOLERANCE[dtype]]
    assert not bad, bad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_the_kernel_passes_its_first_use_self_check(dtype):
    """The check every process runs before the kernel serves a (device, dtype), at the
    model shape below (8/2 heads of 64: the same compiled kernels): each error below its
    tolerance, the errors printed for the bench's log."""
    from lit_sparse.kernels import self_check, triton_kernel

    errors = self_check.measure(triton_kernel, "cuda", dtype, groups=4, head_dim=64)
    print(dtype, {name: f"{err:.1e}" for name, err in errors.items()})
    assert max(errors.values()) <= self_check.TOLERANCES[dtype], errors


@pytest.mark.parametrize("schedule", ["fixed", "learned"])
def test_model_shape_goes_through_triton_and_matches_reference(schedule):
    """B=2, 8 query heads, 2 KV heads, head dim 64, T=1000 (not a multiple of a block)."""
    from lit_sparse import build_attention, kernels
    from lit_sparse.kernels.reference import slots_attention

    length = 1000
    pattern = build_attention("fibonacci", window=12, schedule=schedule).build(0, 16, length)
    pattern = pattern.cuda()
    slots = pattern.slots(length, torch.device("cuda"))
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, length, 64, generator=gen).cuda().requires_grad_()
    k, v = (torch.randn(2, 2, length, 64, generator=gen).cuda().requires_grad_() for _ in "kv")
    assert kernels._triton().supported(q, k, slots)
    weight = torch.randn(2, 8, length, 64, generator=gen).cuda()
    results = []
    for path in (kernels.sparse_attention, slots_attention):
        out = path(q, k, v, slots)
        results.append([out, *torch.autograd.grad((out * weight).sum(), [q, k, v])])
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, atol=2e-4, rtol=2e-4)
