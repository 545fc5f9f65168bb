"""A run's checkpoints hold the generators' states and a resumed fit restores them; loading
a model from a checkpoint leaves the caller's generators alone."""

from __future__ import annotations

import random

import numpy as np
import torch

from lit_sparse.module import LitLanguageModel
from lit_sparse.runs.checkpoints import RandomStates


def draws() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(3)


def test_a_checkpoint_holds_the_generators_and_a_resume_draws_the_same(tmp_path):
    checkpoint: dict = {}
    RandomStates().on_save_checkpoint(None, None, checkpoint)
    torch.save(checkpoint, tmp_path / "c.ckpt")
    expected = draws()
    saved = torch.load(tmp_path / "c.ckpt", weights_only=True)  # plain values only
    RandomStates().on_load_checkpoint(None, None, saved)
    found = draws()
    assert found[:2] == expected[:2] and torch.equal(found[2], expected[2])


def test_the_cli_saves_them_and_loading_a_model_does_not_restore_them(finished_run):
    path = finished_run / "checkpoints" / "last.ckpt"
    assert "rng_states" in torch.load(path, weights_only=True)
    random.seed(1234)  # building the model draws from torch's generator, not Python's
    expected = random.random()
    random.seed(1234)
    LitLanguageModel.load_from_checkpoint(path, weights_only=True)
    assert random.random() == expected
