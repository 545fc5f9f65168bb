"""``ffn_hidden: 0``: blocks of attention alone (Zoology's recall models), which train, export,
decode and load in transformers like any model; the stock layouts, whose blocks all have an
MLP, refuse it in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from lit_sparse import LanguageModel, ModelConfig, build_attention, generate
from lit_sparse.errors import ConfigError
from lit_sparse.formats import pretrained

ROOT = Path(__file__).resolve().parents[1]


def test_zero_width_builds_blocks_without_an_mlp():
    config = ModelConfig(vocab_size=64, n_layers=2, d_model=32, n_heads=2, n_kv_heads=1,
                         head_dim=16, ffn_hidden=0)  # fmt: skip
    model = LanguageModel(config, build_attention("fibonacci", window=2))
    assert all(block.ffn is None and block.ffn_norm is None for block in model.blocks)
    assert not [name for name in model.state_dict() if ".ffn" in name]
    with_mlp = LanguageModel(ModelConfig(**{**config.to_dict(), "ffn_hidden": 8}))
    mlp = 2 * (3 * 32 * 8 + 32)  # per block: gate, up, down and the MLP's norm
    assert with_mlp.num_parameters() - model.num_parameters() == mlp
    with pytest.raises(ConfigError, match=r"ffn_hidden must be an integer >= 0.*got -1"):
        ModelConfig(ffn_hidden=-1)


@pytest.mark.parametrize("layout", ["llama", "mistral"])
def test_the_stock_layouts_refuse_blocks_without_an_mlp(layout, tmp_path):
    config = ModelConfig(vocab_size=64, n_layers=1, d_model=32, n_heads=2, n_kv_heads=1,
                         head_dim=16, ffn_hidden=0)  # fmt: skip
    plugin = (
        build_attention("dense")
        if layout == "llama"
        else build_attention("sliding_window", window=3)
    )
    with pytest.raises(ConfigError, match="no MLP \\(ffn_hidden 0\\).*format 'lit_sparse'"):
        pretrained.save(LanguageModel(config, plugin), tmp_path, layout=layout)
    assert not list(tmp_path.iterdir())
    from lit_sparse.interop.export import choose_format

    assert choose_format(plugin, None) == layout  # with an MLP: the stock layout
    assert choose_format(plugin, None, has_mlp=False) == "lit_sparse"  # export's default


@pytest.mark.slow  # one fit, then transformers
def test_an_attention_only_model_trains_exports_decodes_and_loads_in_transformers(
    tmp_path, monkeypatch
):
    transformers = pytest.importorskip("transformers")
    from lit_sparse.__main__ import main as lit_main

    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    # dense: its default export format would be the stock Llama one, which has no place for
    # blocks without an MLP, so export must choose lit_sparse's own
    configs = [
        "configs/dense.yaml",
        "configs/study/recall/mqar64.yaml",
        "tests/configs/tiny_recall.yaml",
    ]
    args = [a for c in configs for a in ("--config", str(ROOT / c))]
    runs = tmp_path / "runs"
    assert lit_main(["fit", *args, "--model.arch.ffn_hidden", "0",
                     "--trainer.logger.init_args.save_dir", str(runs)]) == 0  # fmt: skip
    exported = tmp_path / "exported"
    assert lit_main(["export", str(runs / "dense" / "version_0"), "--out", str(exported)]) == 0
    config = json.loads((exported / "config.json").read_text())
    assert config["arch"]["ffn_hidden"] == 0 and config["intermediate_size"] == 0

    ours = LanguageModel.from_pretrained(exported)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(exported, trust_remote_code=True)
    tokens = torch.randint(1, 512, (2, 64), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        expected = ours(tokens)
        torch.testing.assert_close(theirs(tokens).logits, expected, rtol=0, atol=1e-5)
        decoded = generate(ours, tokens[:, :8], 24, temperature=0).run()
        steps = [ours(torch.cat([tokens[:, :8], decoded[:, :i]], 1))[:, -1].argmax(-1)
                 for i in range(24)]  # fmt: skip
        assert torch.equal(decoded, torch.stack(steps, 1))  # the cache, step by step
        out = theirs.generate(tokens[:, :8], max_new_tokens=24, do_sample=False)
    assert torch.equal(out[:, 8:], decoded)
