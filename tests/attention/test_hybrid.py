"""The hybrid plugin: which plugin builds each layer (a period or a list), a schedule over the
layers its plugin holds, NoPE global layers, one-line errors, and what the model's other paths
read of it (per-layer decoding caches, FLOPs, distances, the new_offsets policy, the CLI).
Every registered plugin's conformance checks run over its cases in test_plugins.py."""

from __future__ import annotations

import pytest
import torch

from lit_sparse import HybridAttention, LanguageModel, ModelConfig, build_attention
from lit_sparse.attention.dense import DensePattern
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.extrapolation import with_new_offsets
from lit_sparse.evaluation.flops import keys_per_query
from lit_sparse.formats.gguf import check_gguf_model

FIB_LINEAR = {"class_path": "fibonacci", "init_args": {"window": 2, "schedule": "linear"}}


def config(n_layers: int = 4, length: int = 64) -> ModelConfig:
    return ModelConfig(
        vocab_size=97,
        context_length=length,
        n_layers=n_layers,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )


def kinds(plugin: HybridAttention, n_layers: int) -> str:
    return "".join(kind[0] for kind, *_ in plugin.layer_plugins(n_layers))


@pytest.mark.parametrize(
    ("options", "n_layers", "expected"),
    [
        ({}, 8, "lllglllg"),  # default: a global layer in four, the last of each period
        ({"every": 6}, 16, "lllllglllllgllll"),  # Gemma 3's 5:1
        ({"every": 3, "first": 0}, 7, "gllgllg"),
        ({"global_layers": [-1]}, 3, "llg"),
        ({"global_layers": [0, 2]}, 4, "glgl"),
    ],
)
def test_a_period_or_a_list_names_the_global_layers(options, n_layers, expected):
    assert kinds(HybridAttention(**options), n_layers) == expected


def test_a_schedule_runs_over_the_layers_its_plugin_holds():
    """A linear ramp spans the local layers whatever the global layers' positions: 3 local
    layers of 4 take 0.5, 1.0, 1.5, as a 3-layer all-Fibonacci model does."""
    hybrid = LanguageModel(config(4), HybridAttention(FIB_LINEAR, global_layers=[1]))
    alone = LanguageModel(config(3), build_attention(FIB_LINEAR))
    assert {k: float(a) for k, a in hybrid.layer_alphas().items()} == {0: 0.5, 2: 1.0, 3: 1.5}
    assert hybrid.alphas() is None  # not every layer has an alpha
    assert isinstance(hybrid.patterns[1], DensePattern)
    locals_ = [hybrid.distances()[layer] for layer in (0, 2, 3)]
    assert locals_ == alone.distances()


@pytest.mark.parametrize(
    ("options", "n_layers", "message"),
    [
        ({"global_layers": [4]}, 4, "global_layers: layer 4 is out of range for a model of 4"),
        ({"global_layers": [-5]}, 4, "layer -5 is out of range"),
        ({"global_layers": [3, -1]}, 4, "layer 3 is named twice"),
        ({"global_layers": []}, 4, "name at least one global layer"),
        ({"every": 6}, 4, "every=6, first=5: no global layer in a model of 4 layers"),
        ({"every": 1}, 4, "every layer of the 4 is global: no layer is left for local_attention"),
        (
            {"local_attention": {"class_path": "fibonacci", "init_args": {"schedule": {
                "class_path": "Custom", "init_args": {"alphas": [1.0, 1.0, 1.0, 1.0]}}}}},
            4,
            "local_attention: ",
        ),
    ],
)  # fmt: skip
def test_layers_that_do_not_fit_the_model_are_one_line(options, n_layers, message):
    with pytest.raises(ConfigError) as err:
        LanguageModel(config(n_layers), HybridAttention(**options))
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"every": 0}, "every must be an integer >= 1, got 0"),
        ({"every": 4, "first": 4}, "first must be an integer in 0..3"),
        ({"every": 2, "global_layers": [1]}, "name the global layers one way"),
        ({"global_layers": [1.5]}, "global_layers must be a list of layer indices"),
        ({"local_attention": "hybrid"}, "local_attention: a hybrid cannot hold a hybrid"),
        ({"global_attention": "nope_attention"}, "attention='nope_attention'"),
    ],
)
def test_bad_options_are_one_line_before_any_model(options, message):
    with pytest.raises(ConfigError) as err:
        HybridAttention(**options)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_nope_global_layer_attends_to_unrotated_queries_and_keys():
    """With ``global_rope=False`` the dense layer's output is its pattern over the plain
    projections; the local layers (and a RoPE'd hybrid's global layer) rotate them."""
    torch.manual_seed(0)
    options = {"local_attention": "sliding_window", "every": 2}
    nope = LanguageModel(config(2), HybridAttention(**options, global_rope=False)).eval()
    rope = LanguageModel(config(2), HybridAttention(**options)).eval()
    rope.load_state_dict(nope.state_dict())
    assert [p.rotary for p in nope.patterns] == [True, False]
    assert [p.rotary for p in rope.patterns] == [True, True]
    x = torch.randn(2, 20, 32)
    attn = nope.blocks[1].attn

    def heads(proj, n):  # (B, T, n * D) -> (B, n, T, D)
        return proj(x).view(2, 20, n, 16).transpose(1, 2)

    q, k, v = heads(attn.q_proj, 2), heads(attn.k_proj, 1), heads(attn.v_proj, 1)
    plain = attn.o_proj(attn.pattern(q, k, v).transpose(1, 2).reshape(2, 20, -1))
    torch.testing.assert_close(attn(x), plain, rtol=0, atol=0)
    assert not torch.allclose(rope.blocks[1].attn(x), plain, atol=1e-3)


def test_each_layer_keeps_the_cache_its_pattern_needs():
    """Decoding a long sequence: the dense layer keeps the whole past, the Fibonacci layers a
    ring of their largest distance + 1 rows, and the tokens equal the full forward's."""
    torch.manual_seed(0)
    model = LanguageModel(config(3, 32), HybridAttention(FIB_LINEAR, global_layers=[1])).eval()
    total = 600
    ids = torch.randint(0, 97, (1, total))
    with torch.inference_mode():
        cache = model.new_cache(1, total)
        logits = [model(ids[:, :5], cache)]
        logits += [model(ids[:, t : t + 1], cache) for t in range(5, total)]
        full = model(ids)
    torch.testing.assert_close(torch.cat(logits, dim=1), full, rtol=1e-4, atol=1e-4)
    capacities = [layer.cache.capacity for layer in cache.layers]
    largest = [max(pattern.distances(total)) for pattern in model.patterns]
    assert capacities[1] == total
    assert capacities[0] == largest[0] + 1 < total and capacities[2] == largest[2] + 1 < total
    assert cache.describe() == (
        f"layer 0: ring of {capacities[0]} rows; layer 1: whole past ({total} rows); "
        f"layer 2: ring of {capacities[2]} rows"
    )
    fixed = LanguageModel(config(5, 32), HybridAttention("fibonacci", every=2, first=1))
    ring = max(fixed.patterns[0].distances(total)) + 1
    assert fixed.new_cache(1, total).describe() == (
        f"layers 0, 2, 4: ring of {ring} rows; layers 1, 3: whole past ({total} rows)"
    )


def test_flops_and_distances_count_each_layers_own_pattern():
    model = LanguageModel(config(4, 256), HybridAttention(FIB_LINEAR, every=2))
    keys = keys_per_query(model, 256)
    assert keys[1] == keys[3] > 4 * keys[0]  # dense layers: every key up to the position
    assert keys[0] == len(model.distances()[0])
    assert model.unseen_distances(1024)[1] == list(range(256, 1024))


def test_the_new_offsets_policy_reaches_the_plugin_that_has_one():
    model = LanguageModel(config(2), HybridAttention(FIB_LINEAR, global_layers=[-1]))
    assert model.attention.new_offsets_policy() == "use"
    dropped = with_new_offsets(model, "drop")
    assert dropped.attention.local_attention.new_offsets == "drop"
    assert dropped.attention.global_attention == model.attention.global_attention
    for a, b in zip(dropped.state_dict().values(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    no_option = LanguageModel(config(2), HybridAttention("sliding_window", every=2))
    assert no_option.attention.new_offsets_policy() is None
    with pytest.raises(ConfigError, match="has no new_offsets option"):
        with_new_offsets(no_option, "drop")


def test_gguf_refuses_a_hybrid_in_one_line():
    with pytest.raises(ConfigError) as err:
        check_gguf_model(HybridAttention("sliding_window", every=2), has_mlp=True)
    assert "a hybrid model has no GGUF form" in str(err.value)


def test_the_config_round_trips_through_a_name_and_class_paths():
    plugin = build_attention(
        {
            "class_path": "hybrid",
            "init_args": {"local_attention": FIB_LINEAR, "every": 3, "global_rope": False},
        }
    )
    assert build_attention(plugin.to_config()) == plugin
    assert plugin.local_attention.schedule.name == "linear"
    assert plugin.global_attention == build_attention("dense")


def test_the_cli_takes_the_hybrid_and_its_plugins_by_name(capsys, monkeypatch):
    import sys
    from pathlib import Path

    import yaml

    from lit_sparse.__main__ import main

    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    quickstart = Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml"
    args = ["fit", "--config", str(quickstart), "--model.attention", "hybrid",
            "--model.attention.local_attention", "sliding_window",
            "--model.attention.local_attention.window", "4",
            "--model.attention.global_attention=bigbird", "--model.attention.global_rope",
            "false", "--print_config"]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 0
    printed = yaml.safe_load(capsys.readouterr().out)["model"]["attention"]
    plugin = build_attention(printed)
    assert plugin == HybridAttention(
        build_attention("sliding_window", window=4), "bigbird", global_rope=False
    )
