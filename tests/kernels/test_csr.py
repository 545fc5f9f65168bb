"""The sparse-BLAS CPU path equals the dense reference: values and q/k/v/frac gradients.

Shapes are chosen to hit the edges: T = 1, lengths that are no multiple of the chunk, several
chunks and a short last one, taps before the start and past the end of a chunk, GQA groups
1, 2 and 4, both input layouts (head-major and the model's position-major), float32 and
float64, every slot kind.
"""

from __future__ import annotations

import pytest
import torch

import lit_sparse.kernels.csr as csr
from lit_sparse.kernels import KeySlots, csr_attention, exact_slots, sparse_attention
from lit_sparse.kernels.reference import slots_attention


def rung_slots(distances, lo, frac, valid=None, reach=None, dtype=torch.float32):
    lo_t = torch.tensor(lo, dtype=torch.long)
    frac_t = torch.tensor(frac, dtype=dtype, requires_grad=True)
    valid_t = torch.ones(len(lo), dtype=torch.bool) if valid is None else torch.tensor(valid)
    return KeySlots(
        distances=torch.tensor(distances, dtype=torch.long),
        reach=reach or max([*distances, *(x + 1 for x in lo)]) + 1,
        rung_lo=lo_t,
        rung_frac=frac_t,
        rung_valid=valid_t,
    )


def absolute_slots(distances, length, block_size, keys_per_block, seed=0, min_abs=None):
    """Distinct keys per block (as BigBird draws them), some -1, some not yet causal."""
    gen = torch.Generator().manual_seed(seed)
    n_blocks = -(-length // block_size)
    keys = torch.stack(
        [torch.randperm(length + 1, generator=gen)[:keys_per_block] - 1 for _ in range(n_blocks)]
    )
    if keys.shape[1] < keys_per_block:  # short sequences: pad with "none"
        keys = torch.cat([keys, keys.new_full((n_blocks, keys_per_block - keys.shape[1]), -1)], 1)
    return KeySlots(
        distances=torch.tensor(distances, dtype=torch.long),
        reach=max(distances) + 1,
        block_keys=keys,
        block_size=block_size,
        min_abs_distance=max(distances) + 1 if min_abs is None else min_abs,
    )


def inputs(batch, heads, kv_heads, length, dim, dtype, layout, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def make(h):
        if layout == "position":  # the model's layout: (B, T, h, D) memory
            return torch.randn(batch, length, h, dim, generator=gen, dtype=dtype).transpose(1, 2)
        return torch.randn(batch, h, length, dim, generator=gen, dtype=dtype)

    return [make(heads).requires_grad_(), make(kv_heads).requires_grad_(), make(kv_heads)]


def compare(slots, batch=2, heads=4, kv_heads=2, length=37, dim=16, dtype=torch.float32, **kw):
    layout = kw.pop("layout", "head")
    q, k, v = inputs(batch, heads, kv_heads, length, dim, dtype, layout)
    v.requires_grad_()
    leaves = [q, k, v] + ([slots.rung_frac] if slots.n_rungs else [])
    weights = torch.randn(batch, heads, length, dim, dtype=dtype)
    results = []
    for path in (csr_attention, slots_attention):
        out = path(q, k, v, slots)
        grads = torch.autograd.grad((out * weights).sum(), leaves)
        results.append((out, grads))
    (out, grads), (ref, ref_grads) = results
    tol = {"rtol": 1e-10, "atol": 1e-10} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 2e-5}
    assert out.dtype == dtype and out.shape == (batch, heads, length, dim)
    torch.testing.assert_close(out, ref, **tol)
    for name, grad, ref_grad in zip("qkvf", grads, ref_grads, strict=False):
        if name == "f" and dtype == torch.float32:  # a sum over every position: looser
            torch.testing.assert_close(grad, ref_grad, rtol=1e-4, atol=1e-4)
        else:
            torch.testing.assert_close(grad, ref_grad, **tol, msg=lambda m, n=name: f"d{n}: {m}")


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 16 positions (the fewest), two threads per op."""
    monkeypatch.setattr(csr, "CHUNK_BYTES", 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)


FIB = [0, 1, 2, 3, 4, 5, 6, 8, 13, 21, 34]


@pytest.mark.parametrize("length", [1, 2, 5, 16, 17, 37, 100, 129])
@pytest.mark.parametrize("layout", ["head", "position"])
def test_exact_distances(length, layout, small_chunks):
    compare(exact_slots(FIB), length=length, layout=layout)


@pytest.mark.parametrize(("heads", "kv_heads"), [(2, 2), (4, 2), (8, 2), (4, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gqa_groups_and_dtypes(heads, kv_heads, dtype, small_chunks):
    compare(exact_slots(FIB), heads=heads, kv_heads=kv_heads, length=75, dtype=dtype)


@pytest.mark.parametrize("length", [1, 9, 40, 101])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["head", "position"])
def test_interpolated_rungs(length, dtype, layout, small_chunks):
    slots = rung_slots(
        list(range(7)),
        lo=[7, 12, 20, 33, 54, 88],
        frac=[0.0, 0.25, 0.5, 0.99, 0.1, 0.7],
        valid=[True, True, False, True, True, True],
        dtype=dtype,
    )
    compare(slots, length=length, dtype=dtype, layout=layout)


def test_rung_at_the_window_edge_and_lo_zero(small_chunks):
    """lo = 0 reads the query's own row and row -1 (zeros) as its upper tap."""
    compare(rung_slots([0, 1], lo=[0, 1, 3], frac=[0.3, 0.6, 0.5]), length=23)


@pytest.mark.parametrize("length", [1, 15, 64, 90])
@pytest.mark.parametrize("block_size", [1, 7, 16])
def test_absolute_keys(length, block_size, small_chunks):
    compare(absolute_slots([0, 1, 2, 3], length, block_size, 5), length=length)


def test_absolute_keys_with_rungs_float64(small_chunks):
    slots = absolute_slots([0, 1, 2], 70, 8, 3)
    rungs = rung_slots([0, 1, 2], lo=[4, 9], frac=[0.2, 0.8], dtype=torch.float64)
    mixed = KeySlots(
        distances=slots.distances,
        reach=rungs.reach,
        rung_lo=rungs.rung_lo,
        rung_frac=rungs.rung_frac,
        rung_valid=rungs.rung_valid,
        block_keys=slots.block_keys,
        block_size=slots.block_size,
        min_abs_distance=slots.min_abs_distance,
    )
    compare(mixed, length=70, dtype=torch.float64)


def test_distances_beyond_the_length_are_never_attended():
    compare(exact_slots([0, 1, 50, 400]), length=30)


@pytest.mark.slow
def test_default_chunking_long_sequence_two_threads():
    """The default chunk size (2,520 positions here) and a short last chunk."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        compare(exact_slots(FIB + [89, 144]), batch=1, heads=8, kv_heads=2, length=3000, dim=64)
    finally:
        torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads


def test_half_precision_inputs_accumulate_in_float32():
    q, k, v = (x.detach().to(torch.bfloat16) for x in inputs(1, 4, 2, 33, 16, torch.float32, "h"))
    out = csr_attention(q, k, v, exact_slots(FIB))
    ref = slots_attention(q.float(), k.float(), v.float(), exact_slots(FIB))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=2e-2)


def test_sparse_attention_uses_the_csr_path_on_cpu_without_the_compiled_kernel(monkeypatch):
    """The CSR path serves the CPU when the compiled kernel is not built (no compiler, or
    LIT_SPARSE_CPU_KERNEL=csr); tests/kernels/test_compiled.py checks the other branch."""
    calls = []
    monkeypatch.setattr("lit_sparse.kernels.compiled.available", lambda: False)
    monkeypatch.setattr(
        "lit_sparse.kernels.csr_attention",
        lambda *args: calls.append(args) or slots_attention(*args),
    )
    q, k, v = (x.detach() for x in inputs(1, 2, 1, 5, 8, torch.float32, "head"))
    sparse_attention(q, k, v, exact_slots([0, 1]))
    assert len(calls) == 1


def test_inference_mode_then_no_grad_then_training():
    """Index patterns cached under inference_mode serve calls outside it."""
    from lit_sparse import LanguageModel, ModelConfig

    config = ModelConfig(
        vocab_size=64,
        context_length=32,
        n_layers=1,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )
    model = LanguageModel(config, "fibonacci")
    ids = torch.randint(0, 64, (1, 40))
    long_ids = torch.randint(0, 64, (2, 6000))  # several chunks
    with torch.inference_mode():
        model(long_ids)
    with torch.inference_mode():
        expected = model(ids)
    with torch.no_grad():
        torch.testing.assert_close(model(ids), expected)
    model(ids).sum().backward()
    assert model.embedding.weight.grad is not None


def test_the_path_for_builds_whose_products_scale_the_old_output(monkeypatch, small_chunks):
    """Without MKL, torch's CSR product computes beta * out: outputs are zeroed first."""
    monkeypatch.setattr(csr, "_BETA_ZERO_OVERWRITES", False)
    compare(absolute_slots([0, 1, 2, 3], 64, 7, 5), length=64)
    compare(exact_slots(FIB), length=40)
