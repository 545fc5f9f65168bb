"""The compiled decoding paths: the one-call slot step equals the torch one, bfloat16 weights
are widened exactly, and greedy tokens with bfloat16 weights equal float32's on the tests'
prompts."""

from __future__ import annotations

import io
import sys

import pytest
import torch
import torch.nn.functional as F

from lit_sparse.__main__ import main as lit_main
from lit_sparse.attention.decoding import SlotDecoder
from lit_sparse.generation.weights import bfloat16_weights
from lit_sparse.kernels import compiled

from .cases import TOTAL, VOCAB, generation_cases, tiny_model

pytestmark = pytest.mark.skipif(
    not compiled.available(), reason="the compiled CPU kernel cannot be built here"
)

SLOT_CASES = {
    name: plugin
    for name, plugin in generation_cases().items()
    if any(isinstance(layer, SlotDecoder) for layer in tiny_model(plugin).new_cache(1, 8).layers)
}
"""The plugins with a slot layer (a hybrid's dense layers decode by SDPA beside them)."""


def decoded(model, sequence, prompt, use_kernel: bool) -> torch.Tensor:
    cache = model.new_cache(sequence.shape[0], sequence.shape[1])
    for layer in cache.layers:
        if isinstance(layer, SlotDecoder):
            assert layer.compiled  # CPU float32: the kernel's step unless told otherwise
            layer.compiled = use_kernel
    with torch.inference_mode():
        logits = [model(sequence[:, :prompt], cache)]
        logits += [model(sequence[:, t : t + 1], cache) for t in range(prompt, sequence.shape[1])]
    return torch.cat(logits, dim=1)


@pytest.mark.parametrize("case", sorted(SLOT_CASES))
def test_the_compiled_step_equals_the_torch_step(case):
    """Every slot plugin (exact distances, interpolated rungs, BigBird's absolute keys), batch
    2, GQA, through a ring that wraps: the kernel's step and the torch step agree."""
    model = tiny_model(SLOT_CASES[case])
    sequence = torch.randint(0, VOCAB, (2, TOTAL), generator=torch.Generator().manual_seed(7))
    torch.testing.assert_close(
        decoded(model, sequence, 5, True), decoded(model, sequence, 5, False), rtol=0, atol=1e-5
    )


@pytest.mark.parametrize(("rows", "inner"), [(1, 512), (3, 40), (5, 16), (33, 100), (64, 7)])
def test_bfloat16_weights_are_widened_exactly(rows, inner):
    """The kernel's product with bfloat16 weights is the float32 product with the widened
    weights (to float32 rounding), for any number of rows and any inner size, and each row
    is the same bits computed alone."""
    gen = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, inner, generator=gen)
    weight = torch.randn(70, inner, generator=gen).to(torch.bfloat16)
    want = F.linear(x, weight.float())
    got = compiled.bf16_linear(x, weight)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # tiles of 1-4 rows of x and 4 of the weight: every sum in the same order, whatever M
    alone = torch.cat(
        [compiled.bf16_linear(x[i : i + 1].contiguous(), weight) for i in range(rows)]
    )
    assert torch.equal(got, alone)


@pytest.mark.parametrize(
    ("rows", "inner", "out"), [(1, 512, 70), (3, 40, 9), (5, 16, 17), (64, 7, 33)]
)
def test_float32_products_of_few_rows_match_torchs_and_any_row_alone(rows, inner, out):
    """The kernel's float32 product (row-major weights, 8 rows a tile, an edge tile's extra
    rows dropped) is torch's to float32 rounding, and each row is the same bits alone."""
    gen = torch.Generator().manual_seed(rows)
    x, weight = torch.randn(rows, inner, generator=gen), torch.randn(out, inner, generator=gen)
    got = compiled.f32_linear(x, weight)
    torch.testing.assert_close(got, F.linear(x, weight), rtol=1e-5, atol=1e-5)
    alone = torch.cat([compiled.f32_linear(x[i : i + 1].contiguous(), weight) for i in range(rows)])
    assert torch.equal(got, alone)


@pytest.fixture
def set_threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def test_decoding_products_run_on_torch_threads_with_the_same_bits(set_threads):
    """The narrow products and the decoding step share their work among torch's intra-op
    threads (at::parallel_for is inline OpenMP in torch's headers: serial unless the extension
    is built with OpenMP), and give the same bits at one thread and at two."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, 520, generator=gen)
    bf16 = torch.randn(1030, 520, generator=gen).to(torch.bfloat16)
    int8 = torch.randint(-127, 128, (1030, 520), generator=gen, dtype=torch.int8)
    scale = torch.rand(1030, generator=gen)
    products = {}
    for threads in (1, 2):
        set_threads(threads)
        assert compiled.extension().parallel_threads() == threads
        products[threads] = (compiled.bf16_linear(x, bf16), compiled.int8_linear(x, int8, scale))
    assert all(torch.equal(one, two) for one, two in zip(products[1], products[2], strict=True))


def test_narrow_products_take_any_leading_shape_and_skip_a_rows_padding():
    """x (..., K) gives (..., N), as the 2-D call on its rows; int8 rows padded past K are
    read up to K (the padding, filled with 99 here, never enters a sum)."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 40, generator=gen)
    int8 = torch.full((70, 64), 99, dtype=torch.int8)
    int8[:, :40] = torch.randint(-127, 128, (70, 40), generator=gen, dtype=torch.int8)
    scale = torch.rand(70, generator=gen)
    got = compiled.int8_linear(x, int8, scale)
    assert got.shape == (2, 3, 70)
    assert torch.equal(
        got, compiled.int8_linear(x.reshape(6, 40), int8[:, :40], scale).view(2, 3, 70)
    )
    want = x @ (int8[:, :40].float() * scale[:, None]).T
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    bf16 = torch.randn(70, 40, generator=gen).to(torch.bfloat16)
    got = compiled.bf16_linear(x, bf16)
    assert torch.equal(got, compiled.bf16_linear(x.reshape(6, 40), bf16).view(2, 3, 70))


def test_a_model_with_bfloat16_weights_keeps_float32_activations():
    model = bfloat16_weights(tiny_model(generation_cases()["sliding_window"]))
    assert model.embedding.weight.dtype == torch.bfloat16
    assert model.blocks[0].attn.q_proj.weight.dtype == torch.bfloat16
    assert model.norm.weight.dtype == torch.float32
    cache = model.new_cache(1, 10)
    assert cache.layers[0].cache.shape.dtype == torch.float32
    with torch.inference_mode():
        logits = model(torch.zeros(1, 4, dtype=torch.long), cache)
    assert logits.dtype == torch.float32


PROMPTS = ["To be, or not to be", "ROMEO:", "First Citizen:\nBefore we proceed", "12 + 7 ="]


def generated(path, prompt: str, dtype: str, monkeypatch, extra=()) -> str:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    args = ["generate", str(path), "--prompt", prompt, "--temperature", "0", "--ignore_eos"]
    assert lit_main([*args, "--max_new_tokens", "40", "--dtype", dtype, *extra]) == 0
    return out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("run", ["learned_run", "staggered_run"])
def test_greedy_tokens_with_bfloat16_weights_equal_float32s(run, request, monkeypatch):
    """The tests' trained runs and prompts: 40 greedy tokens each, the same text with
    bfloat16 weights as with float32 ones."""
    path = request.getfixturevalue(run).log_dir
    for prompt in PROMPTS:
        fp32 = generated(path, prompt, "float32", monkeypatch)
        assert generated(path, prompt, "bfloat16", monkeypatch) == fp32, prompt
