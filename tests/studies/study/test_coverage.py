"""The coverage of a model's patterns (studies/study/coverage.py): a hybrid's window is its local
plugin's, a learned schedule is noted, and a recorded run's patterns take its policy and its
last alphas on the layers that have one."""

from __future__ import annotations

from pathlib import Path

import pytest

from lit_sparse import build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.parsing.config_files import ModelSpec
from lit_sparse_studies.study.coverage import compute_coverage, recorded_patterns

ROOT = Path(__file__).resolve().parents[3]
LEARNED = {"class_path": "fibonacci", "init_args": {"window": 4, "schedule": "learned"}}
HYBRID = {
    "class_path": "hybrid",
    "init_args": {"local_attention": LEARNED, "global_layers": [1]},
}


def spec(attention, n_layers: int = 3, length: int = 128) -> ModelSpec:
    arch = ModelConfig(vocab_size=97, context_length=length, n_layers=n_layers, d_model=32,
                       n_heads=2, n_kv_heads=1, head_dim=16)  # fmt: skip
    return ModelSpec(arch, build_attention(attention), [])


def test_a_hybrids_window_is_its_local_plugins_and_a_learned_schedule_is_noted():
    coverage = compute_coverage(spec(HYBRID))
    assert coverage.window == 4
    beyond = [sum(d > 4 for d in layer) for layer in coverage.layers]
    assert beyond[1] == 128 - 5  # the dense layer: every distance past the window
    assert any("learned alpha" in note for note in coverage.notes)
    assert any("learned alpha" in note for note in compute_coverage(spec(LEARNED)).notes)


def test_a_recorded_hybrid_takes_its_policy_and_alphas_on_its_alpha_layers():
    patterns = recorded_patterns(HYBRID, 3, 128, new_offsets="drop", alphas=[0.75, 1.25])
    assert [None if p.alpha is None else round(float(p.alpha), 4) for p in patterns] == [
        0.75,
        None,
        1.25,
    ]
    assert all(p.new_offsets == "drop" for p in (patterns[0], patterns[2]))
    assert patterns[1].distances(256) == list(range(256))


@pytest.mark.parametrize("new_offsets", [None, "use"])
def test_a_plugin_without_the_option_is_built_as_recorded(new_offsets):
    patterns = recorded_patterns({"class_path": "dense"}, 2, 64, new_offsets=new_offsets)
    assert [p.distances(64) for p in patterns] == [list(range(64))] * 2


def test_a_hybrid_is_described_by_its_plugins_and_global_layers():
    config = {**HYBRID, "init_args": {**HYBRID["init_args"], "global_rope": False}}
    assert spec(config, n_layers=4).describe() == (
        "hybrid: fibonacci learned W=4 local, dense NoPE in layers [1]"
    )
