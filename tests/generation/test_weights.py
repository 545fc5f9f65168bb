"""The decoding layout (float32 matrices stored column-major) changes no value: the same
parameters, logits and greedy tokens; saving and bfloat16 weights are unaffected."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from lit_sparse import LanguageModel, build_attention, generate
from lit_sparse.generation.weights import bfloat16_weights, decoding_layout
from lit_sparse.kernels import compiled
from tests.attention.test_decoding import LONG, SHORT, cached_logits

from .cases import TOTAL, VOCAB, generation_cases, tiny_model

CASES = generation_cases()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_plugin_decodes_the_laid_out_model_as_the_full_forward(case):
    """The fused products hand each pattern and decoder q, k, v as views of one tensor:
    prefill and decoding still equal the row-major model's full forward (batch 2, GQA)."""
    model = tiny_model(CASES[case])
    ids = torch.randint(0, VOCAB, (2, TOTAL), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        full = model(ids)
    packed = decoding_layout(copy.deepcopy(model))
    assert packed.blocks[0].attn.qkv.active()
    for prompt in (SHORT, LONG):
        torch.testing.assert_close(cached_logits(packed, ids, prompt), full, rtol=0, atol=1e-4)


def column_major(weight: torch.Tensor) -> bool:
    """Stored input-major: column-major, or a slice of a column-major fused buffer."""
    return weight.dim() == 2 and weight.stride(0) == 1 and not weight.is_contiguous()


@pytest.mark.parametrize("kernel", [True, False])
def test_every_float32_matrix_is_laid_out_for_its_product_and_keeps_its_values(kernel, monkeypatch):
    """Row-major for the compiled kernel's product; column-major without the kernel (torch's
    few-row product streams that layout faster)."""
    if kernel and not compiled.available():
        pytest.skip("the compiled CPU kernel cannot be built here")
    monkeypatch.setattr(compiled, "available", lambda: kernel)
    model = tiny_model(build_attention("fibonacci", window=2, schedule="linear"))
    before = {name: t.clone() for name, t in model.state_dict().items()}
    assert decoding_layout(model) is model
    matrices = [m.weight for m in model.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    laid_out = (lambda w: w.stride(-1) == 1) if kernel else column_major
    assert matrices and all(laid_out(w) for w in matrices)
    for block in model.blocks:  # q, k, v one product, gate and up another
        assert block.attn.qkv.active() and block.ffn.gate_up.active()
        assert block.attn.qkv.sizes == [32, 16, 16]  # 4 query heads and 2 KV heads of 8
        assert block.ffn.gate_up.sizes == [block.ffn.gate.weight.shape[0]] * 2
    assert model.norm.weight.is_contiguous()  # vectors stay as they are
    after = model.state_dict()
    assert after.keys() == before.keys()
    for name, value in before.items():
        assert torch.equal(after[name], value), name


def test_logits_and_greedy_tokens_equal_the_row_major_models():
    """Prefill then one token at a time, batch 2, to 4x the training length: within float32
    rounding of a product summed in another order; greedy tokens identical."""
    row_major = tiny_model(build_attention("fibonacci", window=2, schedule="coprime"))
    packed = decoding_layout(copy.deepcopy(row_major))
    ids = torch.randint(0, VOCAB, (2, TOTAL), generator=torch.Generator().manual_seed(3))
    expected = cached_logits(row_major, ids, 5)
    torch.testing.assert_close(cached_logits(packed, ids, 5), expected, rtol=0, atol=1e-5)
    prompt = ids[:, :7].tolist()
    greedy_packed = torch.stack(list(generate(packed, prompt, 30, temperature=0.0)))
    reference = copy.deepcopy(row_major)
    with torch.inference_mode():  # greedy by hand on the row-major twin, no layout applied
        sequence = ids[:, :7]
        for _ in range(30):
            nxt = reference(sequence)[:, -1].argmax(-1, keepdim=True)
            sequence = torch.cat([sequence, nxt], dim=1)
    assert greedy_packed.t().tolist() == sequence[:, 7:].tolist()


def test_generation_lays_the_model_out_and_saving_reads_the_same_weights(tmp_path):
    model = tiny_model(build_attention("dense"))
    list(generate(model, [[1, 2, 3]], 2, temperature=0.0))
    assert model.blocks[0].attn.qkv.active()  # laid out: q, k, v fused
    model.save_pretrained(tmp_path / "saved")
    loaded = LanguageModel.from_pretrained(tmp_path / "saved")
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name


def test_bfloat16_weights_keep_their_layout_and_fuse_row_major():
    """bfloat16 matrices go through the compiled kernel, which reads them row-major: q/k/v
    and gate/up fuse into row-major stacks, and the logits are the unfused model's."""
    model = bfloat16_weights(tiny_model(build_attention("dense")))
    ids = torch.randint(0, VOCAB, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        unfused = model(ids)
    decoding_layout(model)
    attn = model.blocks[0].attn
    assert attn.qkv.active() and attn.qkv.weight.is_contiguous()
    assert attn.q_proj.weight.is_contiguous() and attn.q_proj.weight.dtype == torch.bfloat16
    assert model.blocks[0].ffn.gate_up.active()
    assert model.embedding.weight.is_contiguous()
    with torch.inference_mode():
        torch.testing.assert_close(model(ids), unfused, rtol=0, atol=1e-5)


def test_a_replaced_or_reloaded_weight_is_what_the_layout_computes_with():
    """Loading weights in place updates the fused products; replacing a weight object
    (``load_state_dict(assign=True)``, ``.to()``) ends the fusion: the modules' own
    projections run again. Logits follow the weights either way."""
    plugin = build_attention("fibonacci", window=2)
    packed, other = decoding_layout(tiny_model(plugin)), tiny_model(plugin, seed=5)
    ids = torch.randint(0, VOCAB, (1, 20), generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        expected = other(ids)
    packed.load_state_dict(other.state_dict())  # copied into the views
    assert packed.blocks[0].attn.qkv.active()
    with torch.inference_mode():
        torch.testing.assert_close(packed(ids), expected, rtol=0, atol=1e-5)
    fresh = tiny_model(plugin, seed=6)
    packed.load_state_dict(fresh.state_dict(), assign=True)  # new tensors: fusion ends
    assert not packed.blocks[0].attn.qkv.active()
    with torch.inference_mode():
        torch.testing.assert_close(packed(ids), fresh(ids), rtol=0, atol=1e-5)
    decoding_layout(packed)  # laid out again
    assert packed.blocks[0].attn.qkv.active()
    with torch.inference_mode():
        torch.testing.assert_close(packed(ids), fresh(ids), rtol=0, atol=1e-5)
