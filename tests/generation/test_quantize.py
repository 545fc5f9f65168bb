"""Int8 decoding weights (``--quantize int8``): every matrix replaced, products equal to the
dequantized matrices' within bfloat16 rounding, a trained model's greedy tokens, logits and
held-out perplexity close to float32's, and what it cannot do refused in one line."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from lit_sparse.__main__ import main as lit_main
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.extrapolation import evaluate_lengths
from lit_sparse.formats import pretrained
from lit_sparse.generation import Generation
from lit_sparse.generation.quantize import Int8Embedding, Int8Linear, quantize_int8
from lit_sparse.interop.loading import load_source
from lit_sparse.kernels import compiled
from lit_sparse.kernels.mixed_linear import SMALL_ROWS
from lit_sparse.model import Linear

from .cases import VOCAB, generation_cases, tiny_model
from .test_decode_kernels import PROMPTS, generated

GREEDY_TOKENS = 40


@pytest.mark.parametrize(("rows", "inner"), [(1, 512), (3, 24), (1, 8), (5, 86), (70, 33)])
def test_a_product_is_the_dequantized_matrixs_within_bfloat16_rounding(rows, inner):
    """Any number of rows and any input width (torch's kernel reads 16 channels at a time:
    the widths that are no multiple of 16 are padded); the int8 values are the weights
    rounded to their row's step (max |w| / 127). Up to SMALL_ROWS rows (decoding) the
    compiled kernel computes in float32; more rows (70: a prefill) go through torch's."""
    gen = torch.Generator().manual_seed(inner)
    weight = torch.randn(40, inner, generator=gen)
    layer = Int8Linear(weight)
    step = weight.abs().amax(dim=1, keepdim=True) / 127
    assert layer.weight.dtype == torch.int8 and layer.scale.dtype == torch.float32
    assert ((layer.dequantized() - weight).abs() <= step / 2 * (1 + 1e-5)).all()
    x = torch.randn(rows, inner, generator=gen)
    want = F.linear(x, layer.dequantized())
    got = layer(x)
    assert got.dtype == torch.float32 and got.shape == want.shape
    if rows <= SMALL_ROWS and compiled.available():
        # lit_sparse's kernel: float32 in and out, the sums in float32; each row the same
        # bits computed alone (tiles of 1-4 rows of x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        alone = torch.cat([layer(x[i : i + 1]) for i in range(rows)])
        assert torch.equal(got, alone)
    else:
        # torch's kernel rounds its input and its result to bfloat16 (8 significant bits)
        assert (got - want).norm() / want.norm() < 1e-2


def test_the_int8_embedding_is_its_rows_and_the_output_layer():
    """Rows of very different sizes: a token's vector is its own row's int8 values times its
    own scale, and the output layer is the product with the same matrix."""
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(50, 32, generator=gen) * torch.logspace(-2, 1, 50)[:, None]
    embedding = Int8Embedding(weight)
    idx = torch.tensor([[0, 49, 7], [7, 3, 25]])
    rows = embedding(idx)
    assert torch.equal(rows, embedding.dequantized()[idx])
    step = weight.abs().amax(dim=1, keepdim=True) / 127
    assert ((rows - weight[idx]).abs() <= step[idx] / 2 * (1 + 1e-5)).all()
    features = torch.randn(2, 3, 32, generator=gen)
    torch.testing.assert_close(embedding.project(features), Int8Linear(weight)(features))


def test_every_matrix_is_replaced_and_the_rest_stays_float32():
    model = quantize_int8(tiny_model(generation_cases()["fibonacci-learned-fibonacci-use"]))
    assert not [m for m in model.modules() if isinstance(m, (Linear, nn.Embedding))]
    block = model.blocks[0]
    for proj in (*(getattr(block.attn, p) for p in ("q_proj", "k_proj", "v_proj", "o_proj")),):
        assert isinstance(proj, Int8Linear)
    assert all(isinstance(p, Int8Linear) for p in (block.ffn.gate, block.ffn.up, block.ffn.down))
    assert isinstance(model.embedding, Int8Embedding)
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # the norms
    tokens = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        logits = model(tokens)
    assert logits.dtype == torch.float32 and logits.shape == (2, 9, VOCAB)


def test_what_int8_cannot_do_is_refused_in_one_line():
    model = tiny_model(generation_cases()["sliding_window"])
    with pytest.raises(ConfigError, match=r"quantize='int8': the model is in training mode"):
        quantize_int8(copy.deepcopy(model).train())
    with pytest.raises(ConfigError, match=r"int8 kernel is used on the CPU only; .* on meta"):
        quantize_int8(copy.deepcopy(model).to("meta"))
    quantized = quantize_int8(model)
    with pytest.raises(ConfigError, match=r"int8 weights are for decoding and evaluation only"):
        quantized.train()
    with pytest.raises(ConfigError, match=r"expected a lit_sparse LanguageModel, got Linear"):
        quantize_int8(nn.Linear(4, 4).eval())


def test_a_refused_train_leaves_every_module_in_eval_mode():
    """Issue 47: nn.Module.train set ``training`` on the model and the modules before the
    first int8 one before that refused, so the model claimed training mode afterwards."""
    model = quantize_int8(tiny_model(generation_cases()["sliding_window"]))
    with pytest.raises(ConfigError, match=r"int8 weights are for decoding and evaluation only"):
        model.train()
    assert not model.training and not any(m.training for m in model.modules())
    assert model.eval() is model and model.train(False) is model


def test_an_int8_model_is_never_saved_as_a_pretrained_folder(tmp_path):
    """Issue 47: ``quantize_int8(m).save_pretrained(EXPORT)`` replaced the float weights with
    int8 values and scales that no loader reads. It is refused in one line before anything is
    written: the earlier folder stays byte for byte, a new one is never made."""
    model = tiny_model(generation_cases()["sliding_window"])
    export = tmp_path / "export"
    model.save_pretrained(export)
    before = {p.name: p.read_bytes() for p in export.iterdir()}
    quantized = quantize_int8(copy.deepcopy(model))
    for folder in (export, tmp_path / "new"):
        with pytest.raises(ConfigError) as err:
            quantized.save_pretrained(folder)
        message = str(err.value)
        assert "\n" not in message and message.startswith("save_pretrained: int8 weights")
        assert "save the float model" in message
    assert {p.name: p.read_bytes() for p in export.iterdir()} == before
    assert not (tmp_path / "new").exists()
    with pytest.raises(ConfigError, match=r"int8 weights"):
        pretrained.save(quantized, tmp_path / "direct")
    assert not (tmp_path / "direct").exists()
    assert type(model).from_pretrained(export).embedding.weight.dtype == torch.float32


def greedy_tokens(model, ids: list[int]) -> list[int]:
    generation = Generation(model, [ids], GREEDY_TOKENS, temperature=0)
    return [int(tokens[0]) for tokens in generation]


@pytest.mark.parametrize("run", ["learned_run", "staggered_run", "hybrid_run"])
def test_a_trained_models_greedy_tokens_logits_and_perplexity_match_float32s(run, request):
    """The tests' trained runs and prompts, 40 greedy tokens each: int8's tokens equal
    float32's at >= 95 % of the positions (a sequence that took another token goes on from
    another text, so every later position counts as a miss too). Logits on the held-out
    windows: within 2 % of float32's in norm (measured: 0.4-0.5 %; an int8 matrix's output
    is off by about 0.3 % of its norm from the weights' rounding (a uniform error of up to
    half a step, max |w| / 254, on each) plus the kernel's two bfloat16 roundings, and 2
    layers and the output layer compound; 4x headroom keeps the check robust to another
    seed, while a wrong scale or a misread padded column is off by tens of %). Held-out
    perplexity within 1 %."""
    fit = request.getfixturevalue(run)
    source = load_source(fit.log_dir)
    fp32 = source.model.eval()
    int8 = quantize_int8(copy.deepcopy(fp32))
    agree = total = 0
    for prompt in PROMPTS:
        ids = source.tokenizer.tokenizer.encode(prompt).ids
        want, got = greedy_tokens(fp32, ids), greedy_tokens(int8, ids)
        agree += sum(a == b for a, b in zip(want, got, strict=True))
        total += len(want)
    assert agree / total >= 0.95, f"{agree} of {total} greedy tokens agree"

    windows, _ = next(iter(fit.datamodule.val_windows_at(32, fit.datamodule.val_set_names[0])))
    with torch.inference_mode():
        want, got = fp32(windows), int8(windows)
    assert (got - want).norm() / want.norm() < 0.02

    want, got = (evaluate_lengths(m, fit.datamodule, [32]) for m in (fp32, int8))
    for name in want.sets:
        assert got.ppl(name, 32) == pytest.approx(want.ppl(name, 32), rel=0.01), name


def test_generate_quantize_int8_end_to_end_and_bad_values_are_one_line(
    learned_run, monkeypatch, capsys
):
    path = learned_run.log_dir
    text = generated(path, "ROMEO:", "float32", monkeypatch, ["--quantize", "int8", "--stats"])
    assert text.startswith("ROMEO:") and len(text) > len("ROMEO:")
    assert "tokens/s" in capsys.readouterr().err
    monkeypatch.undo()
    for args, message in [
        (["--quantize", "int4"], "error: quantize='int4': expected one of none, int8\n"),
        (
            ["--quantize", "int8", "--dtype", "bfloat16"],
            "error: quantize='int8' with dtype='bfloat16': int8 replaces the matrices --dtype "
            "would narrow; use one of them\n",
        ),
    ]:
        assert lit_main(["generate", str(path), "--prompt", "x", *args]) == 2
        assert capsys.readouterr().err == message
