"""Subnormal floats as zero on every intra-op thread while training (lit_sparse.kernels.denormals):
torch.set_flush_denormal sets the calling thread only, so these check the other thread too."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from lit_sparse.kernels import compiled
from lit_sparse.kernels.denormals import (
    KEEP_VARIABLE,
    denormals_flushed,
    flush_denormals,
    flushed_denormals,
)
from tests.tiny_runs import tiny_datamodule, tiny_module, tiny_trainer

pytestmark = pytest.mark.skipif(not compiled.available(), reason="needs the compiled CPU kernel")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


N = 1 << 20


@pytest.fixture
def subnormals(two_threads) -> torch.Tensor:
    """2^20 subnormals, made before any flush (flushed, even filling them writes zeros)."""
    assert not denormals_flushed()
    return torch.full((N,), 1e-39)


def left(x: torch.Tensor) -> int:
    """How many subnormals an elementwise product, split over the threads, keeps."""
    return int(((x * 1.0) != 0).sum())


def test_every_thread_flushes_inside_and_none_after(subnormals):
    assert left(subnormals) == N  # IEEE: every subnormal kept
    with flushed_denormals() as flushing:
        assert flushing and denormals_flushed()
        assert left(subnormals) == 0  # the pool's other thread flushes its half too
    assert not denormals_flushed()
    assert left(subnormals) == N


def test_a_caller_that_flushed_its_own_thread_gets_its_workers_back_as_they_were(subnormals):
    """Issue 57 (SW3): a caller that had set torch.set_flush_denormal(True) (its own thread
    only) had the pool's threads left flushed, so its later set_flush_denormal(False) left
    the process half flushed, half IEEE."""
    torch.set_flush_denormal(True)
    try:
        assert 0 < left(subnormals) < N  # the caller flushes, the pool's other thread not
        with flushed_denormals():
            assert left(subnormals) == 0
        assert denormals_flushed() and 0 < left(subnormals) < N  # as the caller had them
        torch.set_flush_denormal(False)
        assert left(subnormals) == N  # nothing left flushed
    finally:
        flush_denormals(False)


def test_the_variable_keeps_ieee_subnormals(subnormals, monkeypatch):
    monkeypatch.setenv(KEEP_VARIABLE, "1")
    with flushed_denormals() as flushing:
        assert not flushing
        assert left(subnormals) == N


def test_fit_flushes_while_it_trains_and_validates_and_restores_after(learned_run):
    """The shared tiny run trained on the CPU: every batch it saw had subnormals flushed."""
    seen = learned_run.callbacks["FloatModeProbe"].flushed
    assert len(seen) > 6 and all(seen)  # 6 training steps and their validation batches
    assert not denormals_flushed()


class RaiseAtStart(pl.Callback):
    """Notes the float mode at the start of training, then ends the fit with an error."""

    flushed: bool | None = None

    def on_train_start(self, *args) -> None:
        self.flushed = denormals_flushed()
        raise RuntimeError("stop before the first step")


def test_a_fit_that_raises_restores_the_mode(tmp_path):
    """Lightning skips every teardown hook when fit raises; the mode is restored all the same."""
    datamodule = tiny_datamodule()
    raising = RaiseAtStart()
    trainer = tiny_trainer(tmp_path, "raises", [raising])
    with pytest.raises(RuntimeError, match="before the first step"):
        trainer.fit(tiny_module(datamodule.vocab_size), datamodule)
    assert raising.flushed
    assert not denormals_flushed()
