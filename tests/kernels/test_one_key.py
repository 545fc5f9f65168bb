"""Many queries reading one key: every CPU backend's gradients against a float64 reference.

The case behind a cuDNN sparse backward's gradients near 1e11 (NVIDIA/cudnn-frontend #384):
every query's slots land on key 0, and every query leans toward it (its score about 4 above
the others), so key 0's dK and dV sum the terms of every query and head. Two ways in:
BigBird's absolute global key (key 0 for every block) beside a window, and a band of
distances as long as the sequence with rungs whose first row reads row 0. The gather path,
the sparse-BLAS path and the compiled CPU kernel are checked here in float64 (to 1e-10) and
in float32 against float64; the Triton kernel's case is ``one-key`` in ``triton_cases.py``
(run under the interpreter by ``test_triton_kernel.py``).
"""

from __future__ import annotations

import pytest
import torch

from lit_sparse.kernels import KeySlots, compiled, csr_attention, gather_attention
from lit_sparse.kernels.reference import slots_attention

LENGTH = 37  # no multiple of a chunk or a work item


def _compiled(q, k, v, slots):
    if not compiled.available():
        pytest.skip("the compiled CPU kernel cannot be built here")
    return compiled.compiled_attention(q, k, v, slots)


BACKENDS = {"gather": gather_attention, "csr": csr_attention, "compiled": _compiled}


def global_key(dtype):
    """A window of 3 and key 0 as every block's absolute key (BigBird's global token)."""
    return KeySlots(
        distances=torch.tensor([0, 1, 2]),
        reach=3,
        block_keys=torch.zeros(-(-LENGTH // 4), 1, dtype=torch.long),
        block_size=4,
        min_abs_distance=3,
    )


def band_and_rungs(dtype):
    """Every distance below the length, and rungs at lo 0, 1 and 6 (each one's first row
    reads row 0 through both taps)."""
    return KeySlots(
        distances=torch.arange(LENGTH),
        reach=LENGTH + 1,
        rung_lo=torch.tensor([0, 1, 6]),
        rung_frac=torch.tensor([0.3, 0.7, 0.45], dtype=dtype, requires_grad=True),
        rung_valid=torch.ones(3, dtype=torch.bool),
    )


PATTERNS = {"global-key": global_key, "band-and-rungs": band_and_rungs}


def sink_inputs(dtype, heads=4, kv_heads=2, dim=16):
    """q, k, v and the output's gradient; every query's score for key 0 about 4 above."""
    gen = torch.Generator().manual_seed(1)
    q, d_out = (
        torch.randn(2, heads, LENGTH, dim, generator=gen, dtype=torch.float64) for _ in "qo"
    )
    k, v = (torch.randn(2, kv_heads, LENGTH, dim, generator=gen, dtype=torch.float64) for _ in "kv")
    lean = torch.randn(dim, generator=gen, dtype=torch.float64)
    lean *= 2 * dim**0.25 / lean.norm()  # (q + lean) . (k_0 + lean) / sqrt(dim): + 4
    q += lean
    k[:, :, 0] += lean
    return [x.to(dtype) for x in (q, k, v, d_out)]


def gradients(path, slots, inputs, dtype):
    q, k, v, d_out = (x.to(dtype) for x in inputs)
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    out = path(q, k, v, slots)
    leaves = [q, k, v] + ([slots.rung_frac] if slots.n_rungs else [])
    return [out.detach(), *torch.autograd.grad(out, leaves, d_out.to(out.dtype))]


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_many_queries_on_one_key_in_float64(backend, pattern):
    inputs = sink_inputs(torch.float64)
    got = gradients(BACKENDS[backend], PATTERNS[pattern](torch.float64), inputs, torch.float64)
    want = gradients(slots_attention, PATTERNS[pattern](torch.float64), inputs, torch.float64)
    dk, dv = want[2], want[3]
    # key 0 is what this tests: it takes the largest dK and dV rows, from every query
    assert dk[:, :, 0].norm(dim=-1).min() > 3 * dk[:, :, 1:].norm(dim=-1).mean()
    assert dv[:, :, 0].norm(dim=-1).min() > 3 * dv[:, :, 1:].norm(dim=-1).mean()
    for name, a, b in zip(["out", "dq", "dk", "dv", "dfrac"], got, want, strict=False):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_many_queries_on_one_key_in_float32_against_float64(backend, pattern):
    """float32 inputs: each result within 1e-5 of the float64 reference's (as a share of
    its largest entry; key 0's rows summed from every query included)."""
    inputs = sink_inputs(torch.float32)  # the reference reads the same rounded inputs
    got = gradients(BACKENDS[backend], PATTERNS[pattern](torch.float32), inputs, torch.float32)
    want = gradients(slots_attention, PATTERNS[pattern](torch.float64), inputs, torch.float64)
    for name, a, b in zip(["out", "dq", "dk", "dv", "dfrac"], got, want, strict=False):
        assert a.dtype == torch.float32
        error = float((a.double() - b).abs().max() / b.abs().max())
        assert error < 1e-5, f"{name}: {error:.2e}"
        if name in ("dk", "dv"):  # key 0's row on its own
            row = float((a[:, :, 0].double() - b[:, :, 0]).abs().max() / b[:, :, 0].abs().max())
            assert row < 1e-5, f"{name} of key 0: {row:.2e}"
