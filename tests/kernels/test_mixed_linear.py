"""Which products the compiled kernel takes (lit_sparse/kernels/mixed_linear.py): few float32
rows on the CPU with no gradient to record; the rest is torch's, in x's dtype whatever the
weights are stored in."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lit_sparse.kernels import compiled
from lit_sparse.kernels.mixed_linear import SMALL_ROWS, kernel_reads, linear

needs_kernel = pytest.mark.skipif(
    not compiled.available(), reason="the compiled CPU kernel cannot be built here"
)


@needs_kernel
def test_decoding_products_take_the_kernel_and_training_keeps_torchs():
    """A few-row float32 product without gradients is the kernel's (bit for bit); one that
    records gradients, or a column-major weight, is torch's."""
    x, weight = torch.randn(2, 24), torch.randn(10, 24, requires_grad=True)
    with torch.no_grad():
        assert kernel_reads(x, weight)
        assert torch.equal(linear(x, weight), compiled.f32_linear(x, weight))
    assert not kernel_reads(x, weight)  # grad mode and a parameter: autograd needs torch's
    assert linear(x, weight).requires_grad
    with torch.no_grad():
        assert not kernel_reads(x, weight.detach().t().contiguous().t())
        more_rows = torch.randn(SMALL_ROWS + 1, 24)  # more rows than a decoding step
        assert not kernel_reads(more_rows, weight)


@needs_kernel
def test_bfloat16_weights_are_read_directly_other_dtypes_are_not():
    x = torch.randn(SMALL_ROWS, 24)
    with torch.no_grad():
        assert kernel_reads(x, torch.randn(10, 24).to(torch.bfloat16))
        assert not kernel_reads(x, torch.randn(10, 24, dtype=torch.float64))
        assert not kernel_reads(x.double(), torch.randn(10, 24, dtype=torch.float64))


def test_torchs_product_is_in_xs_dtype_whatever_the_weights_dtype():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, dtype=torch.float64, generator=gen)
    weight = torch.randn(3, 8, generator=gen).to(torch.bfloat16)
    got = linear(x, weight)
    assert got.dtype == torch.float64
    assert torch.equal(got, F.linear(x, weight.double()))
