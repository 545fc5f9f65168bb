"""``python -m lit_sparse export`` for transformers: the tokenizer and generation configs,
the default format (stock Llama for dense), the README's pipeline on an export, and the
one-line refusals."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

import lit_sparse.interop.hf  # noqa: E402, F401  (registers the classes: no remote code)
from lit_sparse import LanguageModel, build_attention  # noqa: E402
from lit_sparse.__main__ import main as lit_main  # noqa: E402
from lit_sparse.errors import ConfigError  # noqa: E402
from lit_sparse.interop.export import choose_format, export_run  # noqa: E402
from tests.tiny_runs import shared_run  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"

pytestmark = pytest.mark.slow  # a trained run, exports, subprocesses


@pytest.fixture(scope="module")
def exported(learned_run, tmp_path_factory):
    return export_run(learned_run.log_dir, tmp_path_factory.mktemp("hf") / "learned")


@pytest.fixture(scope="module")
def dense_run(tmp_path_factory):
    return shared_run(tmp_path_factory, "dense")


def test_autotokenizer_and_generate_know_the_end_of_text(exported):
    tokenizer = AutoTokenizer.from_pretrained(exported.folder)
    assert tokenizer.eos_token == "<|endoftext|>" and tokenizer.eos_token_id == 0
    assert tokenizer.pad_token_id == tokenizer.bos_token_id == 0
    ids = tokenizer("To be, or not").input_ids
    from lit_sparse.data.tokenizer import load_tokenizer

    assert ids == load_tokenizer(str(exported.folder)).tokenizer.encode("To be, or not").ids
    config = transformers.GenerationConfig.from_pretrained(exported.folder)
    assert (config.eos_token_id, config.bos_token_id, config.pad_token_id) == (0, 0, 0)


def test_transformers_generate_on_an_export_equals_lit_sparse_s(exported, learned_run):
    """The export loaded by transformers (registered classes) generates the run's own greedy
    tokens, stopping at the EOS like ``lit_sparse.generate`` with ``eos_id``."""
    from lit_sparse import generate

    tokenizer = AutoTokenizer.from_pretrained(exported.folder)
    model = AutoModelForCausalLM.from_pretrained(exported.folder)
    prompt = tokenizer(["ROMEO:"], return_tensors="pt").input_ids
    out = model.generate(prompt, max_new_tokens=80, do_sample=False)
    network = learned_run.module.model.eval()
    expected = generate(network, prompt, 80, temperature=0, eos_id=0).run()
    new = out[:, prompt.shape[1] :]
    assert torch.equal(new, expected[:, : new.shape[1]])


def test_a_dense_run_exports_as_a_stock_llama_folder_by_default(dense_run, tmp_path, capsys):
    out = tmp_path / "dense"
    assert lit_main(["export", str(dense_run.log_dir), "--out", str(out)]) == 0
    assert "(llama format)" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "auto_map" not in config
    assert config["eos_token_id"] == 0 and config["training_length"] == 32
    model = AutoModelForCausalLM.from_pretrained(out)  # a stock class: no remote code
    network = dense_run.module.model.eval()
    tokens = torch.randint(0, 500, (2, 100))
    with torch.inference_mode():
        expected = network(tokens)
        torch.testing.assert_close(model(tokens).logits, expected, rtol=0, atol=1e-4)
        torch.testing.assert_close(LanguageModel.from_pretrained(out)(tokens), expected)
    # the same run in lit_sparse's format, on request
    again = tmp_path / "dense-lit"
    assert (
        lit_main(["export", str(dense_run.log_dir), "--out", str(again), "--format", "lit_sparse"])
        == 0
    )
    assert json.loads((again / "config.json").read_text())["model_type"] == "lit_sparse"


def test_a_dense_run_exports_as_a_gguf_file_llama_cpp_runs(dense_run, tmp_path, capsys):
    """The run route of --format gguf (tests/formats/test_gguf.py takes an exported folder):
    the trained weights' greedy tokens through llama.cpp equal the run's own."""
    pytest.importorskip("gguf")
    out = tmp_path / "dense.gguf"
    argv = ["export", str(dense_run.log_dir), "--format", "gguf", "--gguf-type", "f32"]
    assert lit_main([*argv, "--out", str(out)]) == 0
    assert f"to {out} (gguf f32 format)" in capsys.readouterr().out
    llama_cpp = pytest.importorskip("llama_cpp")
    f32 = llama_cpp.GGML_TYPE_F32
    llm = llama_cpp.Llama(str(out), n_ctx=64, n_threads=1, type_k=f32, type_v=f32, verbose=False)
    prompt = llm.tokenize(b"ROMEO:", add_bos=False)
    new = []
    for token in llm.generate(prompt, temp=0.0):  # greedy
        new.append(token)
        if len(new) == 30:
            break
    llm.close()
    from lit_sparse import generate

    expected = generate(dense_run.module.model.eval(), [prompt], 30, temperature=0).run()
    assert new == expected[0].tolist()


def test_a_stock_format_the_pattern_does_not_have_is_one_line(learned_run, tmp_path, capsys):
    out = tmp_path / "x"
    assert (
        lit_main(["export", str(learned_run.log_dir), "--out", str(out), "--format", "mistral"])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: format='mistral': a fibonacci model has no mistral form")
    assert "--format lit_sparse" in err and "\n" not in err


def test_the_default_format_is_the_stock_one_where_it_fits():
    assert choose_format(build_attention("dense"), None) == "llama"
    assert choose_format(build_attention("sliding_window", window=3), None) == "mistral"
    assert choose_format(build_attention("fibonacci"), None) == "lit_sparse"
    assert choose_format(build_attention("dense"), "lit_sparse") == "lit_sparse"
    with pytest.raises(ConfigError, match="format='onnx': must be one of lit_sparse, llama"):
        choose_format(build_attention("dense"), "onnx")
    assert choose_format(build_attention("dense"), "gguf") == "gguf"  # a file for llama.cpp
    with pytest.raises(ConfigError, match="format='gguf': a sliding_window model has no GGUF"):
        choose_format(build_attention("sliding_window", window=3), "gguf")


def readme_pipeline() -> str:
    """The Python block of the README's "Generating text" section that uses a pipeline."""
    text = README.read_text()
    start = text.index("## Generating text\n")
    section = text[start : text.find("\n## ", start + 1)]
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "pipeline(" in b]
    return block


def test_the_readme_pipeline_generates_text_from_an_export(exported, tmp_path):
    """The README's pipeline code, as written, in a fresh process that never imported
    lit_sparse, on an export standing in for the quickstart's."""
    folder = tmp_path / "exported" / "quickstart-coprime"
    folder.parent.mkdir()
    folder.symlink_to(exported.folder, target_is_directory=True)
    code = readme_pipeline()
    assert 'model="exported/quickstart-coprime"' in code and "trust_remote_code=True" in code
    guarded = "import sys\n" + code + "\nassert 'lit_sparse.interop.hf' in sys.modules\n"
    done = subprocess.run(
        [sys.executable, "-c", guarded], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ROMEO:") and len(done.stdout) > len("ROMEO:") + 10
