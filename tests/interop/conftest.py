"""Exported models for the interop tests: a random tiny one (no training) and the shared tiny
learned run's export."""

from __future__ import annotations

import pytest
import torch

import lit_sparse
from lit_sparse import LanguageModel, ModelConfig

TRAINING_LENGTH = 32


def random_model(attention=None, seed: int = 0) -> LanguageModel:
    """2 layers, d_model 32, the embedded tokenizer's vocabulary, trained at 32 tokens."""
    torch.manual_seed(seed)
    config = ModelConfig(
        vocab_size=8192,
        context_length=TRAINING_LENGTH,
        n_layers=2,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )
    attention = attention or {"class_path": "fibonacci", "init_args": {"window": 2}}
    return LanguageModel(config, attention).eval()


@pytest.fixture(scope="session")
def random_export(tmp_path_factory):
    """A random model saved with the embedded tokenizer (``save_pretrained(tokenizer=...)``)."""
    folder = tmp_path_factory.mktemp("random_export") / "model"
    random_model().save_pretrained(folder, tokenizer=lit_sparse.Tokenizer.from_pretrained())
    return folder


@pytest.fixture(scope="session")
def learned_export(learned_run, tmp_path_factory):
    """The shared tiny learned run, exported (``python -m lit_sparse export``'s function)."""
    from lit_sparse.interop.export import export_run

    return export_run(learned_run.log_dir, tmp_path_factory.mktemp("export") / "learned").folder
