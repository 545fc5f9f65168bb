"""The plugin configurations the generation tests run over, and their tiny models.

Every registered plugin's cases come from tests/attention/cases.py (one place here), plus the
Gaussian rung read (a learned pattern whose decoder is its own), each under both new_offsets
policies where the plugin has them.
"""

from __future__ import annotations

import torch

from lit_sparse import LanguageModel, ModelConfig, build_attention
from lit_sparse.attention.fibonacci_patterns import LearnedFibonacciPattern
from lit_sparse.attention.schedules import Learned
from tests.attention.cases import plugin_cases

N_LAYERS = 2
TRAINING_LENGTH = 16
TOTAL = 4 * TRAINING_LENGTH  # decoding goes to 4x the training length
VOCAB = 64


def tiny_config(n_layers: int = N_LAYERS, training_length: int = TRAINING_LENGTH) -> ModelConfig:
    """GQA: 4 query heads, 2 key/value heads."""
    return ModelConfig(
        vocab_size=VOCAB,
        context_length=training_length,
        n_layers=n_layers,
        d_model=32,
        n_heads=4,
        n_kv_heads=2,
        head_dim=8,
    )


def generation_cases(window: int = 2) -> dict[str, object]:
    """id -> plugin: every case of plugin_cases, Fibonacci ones under both new_offsets
    policies, and the Gaussian rung read."""
    cases = {}
    for name, plugin in plugin_cases(window, N_LAYERS).items():
        if "new_offsets" in plugin.init_args():
            for policy in ("use", "drop"):
                cases[f"{name}-{policy}"] = build_attention(plugin, new_offsets=policy)
        else:
            cases[name] = plugin
    for policy in ("use", "drop"):
        cases[f"fibonacci-learned-gaussian-{policy}"] = build_attention(
            "fibonacci",
            window=window,
            schedule=Learned(read="gaussian"),
            new_offsets=policy,
        )
    return cases


def tiny_model(plugin, seed: int = 0, **config) -> LanguageModel:
    """A random model in eval mode; learned alphas moved to non-integer values (so every
    rung interpolates) and the Gaussian width narrowed."""
    torch.manual_seed(seed)
    model = LanguageModel(tiny_config(**config), plugin).eval()
    for layer, pattern in enumerate(model.patterns):
        if isinstance(pattern, LearnedFibonacciPattern):
            with torch.no_grad():
                pattern.theta.fill_(0.37 - 0.9 * layer)
                if hasattr(pattern, "rung_width"):
                    pattern.rung_width.fill_(1.3)
    return model
