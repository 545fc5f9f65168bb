"""``export --format gguf``: a dense model as one GGUF file that llama.cpp runs. The file read
back holds the model's shape, tokenizer and weights (f32 exact, f16 and q8_0 close);
llama-cpp-python (the ``llama-cpp`` extra) tokenizes as we do and generates our greedy tokens
from it; a model llama.cpp has no pattern for, and a missing extra, are one line."""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest
import torch

import lit_sparse
from lit_sparse import LanguageModel, ModelConfig
from lit_sparse.__main__ import main as lit_main
from lit_sparse_studies.bench.decode_llama_cpp import open_llama

PROMPT = "ROMEO: What light through yonder window breaks?"


def bench_main(argv):
    """``python -m lit_sparse bench ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["bench", *argv])


def dense_model() -> LanguageModel:
    """2 layers, d_model 32, 4 query and 2 key/value heads (so the GQA grouping shows), the
    embedded tokenizer's vocabulary, trained at 32 tokens; random weights."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=8192,
        context_length=32,
        n_layers=2,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
    )
    return LanguageModel(config, {"class_path": "dense"}).eval()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The dense model saved with the embedded tokenizer, and its GGUF files (``export``)."""
    pytest.importorskip("gguf")
    root = tmp_path_factory.mktemp("gguf")
    model = dense_model()
    model.save_pretrained(root / "model", tokenizer=lit_sparse.Tokenizer.from_pretrained())
    files = {}
    for kind in ("f32", "f16", "q8_0"):
        files[kind] = root / f"model-{kind}.gguf"
        argv = ["export", str(root / "model"), "--format", "gguf", "--out", str(files[kind])]
        assert lit_main([*argv, "--gguf-type", kind]) == 0
    return model, files


def _rotate_half_rows(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's q/k rows (adjacent RoPE pairs per head) back in rotate-half order."""
    rows, cols = weight.shape
    return weight.reshape(heads, rows // heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def _read(path, fields: bool = True):
    import gguf

    reader = gguf.GGUFReader(path)
    fields = {name: field.contents() for name, field in reader.fields.items()} if fields else {}
    tensors = {}
    for tensor in reader.tensors:
        data = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        tensors[tensor.name] = (
            tensor.tensor_type.name,
            data.reshape(tuple(reversed(tensor.shape))),
        )
    return fields, tensors


def _ours(model: LanguageModel) -> dict[str, np.ndarray]:
    """The model's tensors under llama.cpp's names, in our own layout."""
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    names = {"token_embd.weight": "embedding.weight", "output_norm.weight": "norm.weight"}
    block = {
        "attn_norm": "attn_norm",
        "attn_q": "attn.q_proj",
        "attn_k": "attn.k_proj",
        "attn_v": "attn.v_proj",
        "attn_output": "attn.o_proj",
        "ffn_norm": "ffn_norm",
        "ffn_gate": "ffn.gate",
        "ffn_up": "ffn.up",
        "ffn_down": "ffn.down",
    }
    for layer in range(model.config.n_layers):
        for theirs, ours in block.items():
            names[f"blk.{layer}.{theirs}.weight"] = f"blocks.{layer}.{ours}.weight"
    return {theirs: state[ours] for theirs, ours in names.items()}


def test_the_gguf_file_holds_the_model_and_its_tokenizer(exported):
    model, files = exported
    config, tokenizer = model.config, lit_sparse.Tokenizer.from_pretrained()
    fields, tensors = _read(files["f32"])
    expected = {
        "general.architecture": "llama",
        "general.file_type": 0,
        "llama.context_length": 32,
        "llama.embedding_length": 32,
        "llama.block_count": 2,
        "llama.feed_forward_length": config.ffn_width,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.rope.dimension_count": 8,
        "llama.vocab_size": 8192,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.eos_token_id": tokenizer.eos_id,
        "tokenizer.ggml.bos_token_id": tokenizer.eos_id,
        "tokenizer.ggml.add_bos_token": False,
    }
    assert {key: fields[key] for key in expected} == expected
    assert fields["llama.rope.freq_base"] == config.rope_theta
    assert fields["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(config.norm_eps)
    vocab = tokenizer.tokenizer.get_vocab(with_added_tokens=True)
    assert fields["tokenizer.ggml.tokens"] == sorted(vocab, key=vocab.get)
    assert fields["tokenizer.ggml.token_type"][tokenizer.eos_id] == 3  # CONTROL
    assert fields["tokenizer.ggml.merges"][:2] == ["Ġ t", "h e"]
    # f32: our weights exactly (no output.weight: the head is the embedding)
    ours = _ours(model)
    assert set(tensors) == set(ours)
    for name, (kind, data) in tensors.items():
        if name.endswith(("attn_q.weight", "attn_k.weight")):
            heads = 4 if "attn_q" in name else 2
            data = _rotate_half_rows(data, heads)
        assert kind == "F32" and np.array_equal(data, ours[name]), name
    # f16 and q8_0: close; norms stay f32; q8_0's ffn_down (rows of 86) falls back to f16
    for kind, atol in (("f16", 1e-3), ("q8_0", 1e-2)):
        _, tensors = _read(files[kind], fields=False)
        for name, (stored, data) in tensors.items():
            if name.endswith(("attn_q.weight", "attn_k.weight")):
                data = _rotate_half_rows(data, 4 if "attn_q" in name else 2)
            if name.endswith("norm.weight"):
                assert stored == "F32"
            elif kind == "q8_0":
                assert stored == ("F16" if "ffn_down" in name else "Q8_0"), name
            np.testing.assert_allclose(data, ours[name], rtol=0, atol=atol, err_msg=name)
    assert files["q8_0"].stat().st_size < files["f16"].stat().st_size < files["f32"].stat().st_size


def test_llama_cpp_tokenizes_and_generates_as_lit_sparse(exported):
    """llama.cpp on the f32 file, with an f32 cache as ours: the prompt's tokens, the logits of
    every position and 40 greedy tokens (past the training length of 32) equal lit_sparse's.
    q8_0 with llama.cpp's default f16 cache: within their rounding (q8_0 rounds the
    activations a product reads too)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    model, files = exported
    tokenizer = lit_sparse.Tokenizer.from_pretrained()
    f32 = llama_cpp.GGML_TYPE_F32
    options = {"n_ctx": 64, "n_threads": 1, "logits_all": True, "verbose": False}
    llm = open_llama(files["f32"], type_k=f32, type_v=f32, **options)
    ids = llm.tokenize(PROMPT.encode(), add_bos=False)
    assert ids == tokenizer.encode(PROMPT)
    assert llm.detokenize(ids).decode() == PROMPT
    llm.eval(ids)
    with torch.inference_mode():
        logits = model(torch.tensor([ids]))[0].numpy()
    np.testing.assert_allclose(llm.scores[: len(ids)], logits, rtol=0, atol=1e-4)
    new = []
    for _ in range(40):
        new.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
        llm.eval([new[-1]])
    llm.close()
    expected = lit_sparse.generate(model, [ids], 40, temperature=0).run()[0].tolist()
    assert new == expected
    small = open_llama(files["q8_0"], **options)
    small.eval(ids)
    error = np.abs(small.scores[: len(ids)] - logits)  # the logits' std is 1.0
    small.close()
    assert error.mean() < 0.05 and error.max() < 0.5


def test_gguf_export_refusals_are_one_line(random_export, exported, tmp_path, capsys):
    """A fibonacci model (llama.cpp has only dense attention), --gguf-type without --format
    gguf, a folder or another file as --out: one line each, nothing written."""
    out = tmp_path / "model.gguf"
    argv = ["export", str(random_export), "--format", "gguf", "--out", str(out)]
    assert lit_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: format='gguf': a fibonacci model has no GGUF form")
    assert "only dense exports as gguf" in err and err.count("\n") == 1 and not out.exists()
    assert lit_main(["export", str(random_export), "--out", str(out), "--gguf-type", "f16"]) == 2
    assert "--gguf-type f16: only with --format gguf" in capsys.readouterr().err
    dense_folder = exported[1]["f32"].parent / "model"
    for existing, why in ((tmp_path, "a folder"), (dense_folder / "README.md", "not a GGUF")):
        argv = ["export", str(dense_folder), "--format", "gguf", "--out", str(existing)]
        assert lit_main(argv) == 2
        assert why in capsys.readouterr().err


@pytest.fixture
def without(monkeypatch):
    """importlib.metadata as it answers where the named distributions are not installed."""
    version = importlib.metadata.version

    def hide(*names):
        def lookup(name):
            if name in names:
                raise importlib.metadata.PackageNotFoundError(name)
            return version(name)

        monkeypatch.setattr(importlib.metadata, "version", lookup)

    return hide


def test_a_missing_extra_is_one_line_naming_it(without, random_export, tmp_path, capsys):
    without("gguf", "llama-cpp-python")
    out = tmp_path / "model.gguf"
    assert lit_main(["export", str(random_export), "--format", "gguf", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "needs the `gguf` extra" in err and 'pip install "lit_sparse[gguf]"' in err
    assert err.count("\n") == 1
    # the bench refuses before any child process starts
    assert bench_main(["decode", "--llama-cpp", "--contexts", "64", "--rss-tokens", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: timing llama.cpp (--llama-cpp) needs the `llama-cpp`")
    assert captured.err.count("\n") == 1 and "context 64" not in captured.err + captured.out


def test_an_export_edited_to_dense_is_refused(random_export, tmp_path, capsys):
    """Issue 47: a fibonacci export whose config.json was edited to dense was written as a
    GGUF with only the load's warning; its weights never learned dense attention."""
    import json
    import shutil

    folder = tmp_path / "edited"
    shutil.copytree(random_export, folder)
    config = json.loads((folder / "config.json").read_text())
    config["attention"] = {
        "class_path": "lit_sparse.attention.dense.DenseAttention",
        "init_args": {},
    }
    (folder / "config.json").write_text(json.dumps(config))
    out = tmp_path / "model.gguf"
    assert lit_main(["export", str(folder), "--format", "gguf", "--out", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("error: format='gguf': the weights were trained with fibonacci attention")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["edited"]


@pytest.mark.parametrize(
    "failure",
    [OSError("262144 requested and 107960 written"), OSError(28, "No space left on device")],
    ids=["short-write", "ENOSPC"],
)
def test_a_full_disk_says_so(failure, exported, tmp_path, monkeypatch, capsys):
    """Issue 47: numpy's short write on a full disk ("262144 requested and 107960 written",
    no errno) was passed on as it was; it says the disk is full, as every other writer does,
    and leaves no file."""
    import gguf

    def full(self, *args, **kwargs):
        raise failure

    monkeypatch.setattr(gguf.GGUFWriter, "write_tensors_to_file", full)
    out = tmp_path / "model.gguf"
    folder = exported[1]["f32"].parent / "model"
    assert lit_main(["export", str(folder), "--format", "gguf", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {str(out)!r}: the disk is full")
    assert err.count("\n") == 1 and list(tmp_path.iterdir()) == []


def test_the_guide_shows_the_amx_workaround_beside_the_q8_0_file():
    """Issue 47: ``Llama("dense-q8_0.gguf")`` as docs/generation.md showed it segfaults on an
    AMX-INT8 CPU (upstream llama.cpp #20824); the workaround was in performance.md only."""
    import inspect
    from pathlib import Path

    guide = (Path(__file__).parents[2] / "docs" / "generation.md").read_text()
    section = guide[guide.index("## llama.cpp (GGUF)") : guide.index("## The cache of every")]
    assert 'open_llama("dense-q8_0.gguf"' in section and "llama.cpp#20824" in section
    assert "**options" in str(inspect.signature(open_llama))
