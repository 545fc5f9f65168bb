"""Tiny runs for the callback, evaluation and notebook tests (shared through conftest shims).

A 2-layer model (d_model 32) on the embedded corpus, windows of 32 predictions, 5 held-out
windows per set: 5 / 2 / 1 windows at 1x / 2x / 4x the training length.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger

from lit_sparse.callbacks import (
    AlphaTrajectory,
    LengthExtrapolation,
    PositionLoss,
    SparseThroughputMonitor,
)
from lit_sparse.config import ModelConfig
from lit_sparse.data import TextDataModule
from lit_sparse.kernels.denormals import denormals_flushed
from lit_sparse.module import LitLanguageModel

SEQ_LEN = 32
VAL_WINDOWS = 5
N_BINS = 4

LEARNED = {
    "class_path": "fibonacci",
    "init_args": {"window": 2, "n_rungs": 7, "schedule": "learned"},
}
STAGGERED = {
    "class_path": "fibonacci",
    "init_args": {"window": 2, "n_rungs": 7, "schedule": "linear"},
}
DENSE = {"class_path": "dense", "init_args": {"backend": "sdpa"}}
HYBRID = {
    "class_path": "hybrid",
    "init_args": {
        "local_attention": LEARNED,
        "global_attention": DENSE,
        "global_layers": [-1],
        "global_rope": False,
    },
}
"""Layer 0 learned-alpha Fibonacci, layer 1 a NoPE dense layer."""


def tiny_datamodule(**overrides: Any) -> TextDataModule:
    """The embedded corpus (token cache: the suite's session folder)."""
    kwargs = {"seq_len": SEQ_LEN, "batch_size": 4, "val_windows": VAL_WINDOWS}
    return TextDataModule(**{**kwargs, **overrides})


def tiny_module(
    vocab_size: int,
    attention: dict | None = None,
    max_steps: int = 6,
    seq_len: int = SEQ_LEN,
    lr: float = 3e-2,
) -> LitLanguageModel:
    arch = ModelConfig(
        vocab_size=vocab_size,
        context_length=seq_len,
        n_layers=2,
        d_model=32,
        n_heads=2,
        n_kv_heads=1,
        head_dim=16,
    )
    return LitLanguageModel(arch, attention or LEARNED, lr=lr, warmup_steps=1, max_steps=max_steps)


def tiny_trainer(
    root: Path,
    name: str,
    callbacks: list,
    max_steps: int = 6,
    val_check_interval: int = 3,
    **kwargs: Any,
) -> pl.Trainer:
    options = dict(
        accelerator="cpu",
        devices=1,
        max_steps=max_steps,
        val_check_interval=val_check_interval,
        check_val_every_n_epoch=None,
        log_every_n_steps=1,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=TensorBoardLogger(str(root), name=name),
        callbacks=callbacks,
    )
    options.update(kwargs)
    return pl.Trainer(**options)


class FloatModeProbe(pl.Callback):
    """Whether subnormal floats read as zero at each training and validation batch."""

    def __init__(self) -> None:
        self.flushed: list[bool] = []

    def on_train_batch_start(self, *args: Any) -> None:
        self.flushed.append(denormals_flushed())

    on_validation_batch_start = on_train_batch_start


def all_callbacks(every_n_steps: int = 2, series_runs: bool = False) -> list[pl.Callback]:
    """The observers; ``series_runs``: a TensorBoard run per layer and per position bin."""
    return [
        FloatModeProbe(),
        AlphaTrajectory(every_n_steps=every_n_steps, layer_runs=series_runs),
        PositionLoss(n_bins=N_BINS, bin_runs=series_runs),
        LengthExtrapolation(),
        SparseThroughputMonitor(average_over=2),
        ModelCheckpoint(every_n_train_steps=3, save_last=True, save_top_k=1),
    ]


@dataclass
class FitRun:
    """What a tiny fit left: its folder, the module and datamodule, the callbacks."""

    log_dir: Path
    module: LitLanguageModel
    datamodule: TextDataModule
    callbacks: dict[str, pl.Callback]
    initial_alphas: torch.Tensor | None


def fit_run(
    root: Path,
    name: str,
    attention: dict,
    max_steps: int = 6,
    seed: int = 0,
    callbacks: list | None = None,
    **trainer_kwargs: Any,
) -> FitRun:
    pl.seed_everything(seed, verbose=False)
    dm = tiny_datamodule()
    module = tiny_module(dm.vocab_size, attention, max_steps=max_steps)
    initial = module.model.alphas()
    callbacks = all_callbacks() if callbacks is None else callbacks
    trainer = tiny_trainer(root, name, callbacks, max_steps=max_steps, **trainer_kwargs)
    trainer.fit(module, datamodule=dm)
    return FitRun(
        Path(trainer.log_dir), module, dm, {type(cb).__name__: cb for cb in callbacks}, initial
    )


_RUNS: dict[tuple[str, str], FitRun] = {}


def shared_run(tmp_path_factory: pytest.TempPathFactory, name: str) -> FitRun:
    """One fit per name per session, whichever test folder asks first."""
    key = (str(tmp_path_factory.getbasetemp()), name)
    if key not in _RUNS:
        attention = {"learned": LEARNED, "staggered": STAGGERED, "dense": DENSE, "hybrid": HYBRID}[
            name
        ]
        callbacks = all_callbacks(series_runs=name == "staggered")
        _RUNS[key] = fit_run(tmp_path_factory.mktemp("runs"), name, attention, callbacks=callbacks)
    return _RUNS[key]


@pytest.fixture(scope="session")
def learned_run(tmp_path_factory) -> FitRun:
    """Learned alpha, 6 steps, alpha every 2 steps, validation at steps 3 and 6."""
    return shared_run(tmp_path_factory, "learned")


@pytest.fixture(scope="session")
def staggered_run(tmp_path_factory) -> FitRun:
    """Linear (staggered) static alpha: the ramp 0.5 .. 1.5 over 2 layers; its observers write
    a TensorBoard run per layer and per position bin (``layer_runs``, ``bin_runs``)."""
    return shared_run(tmp_path_factory, "staggered")


@pytest.fixture(scope="session")
def hybrid_run(tmp_path_factory) -> FitRun:
    """A hybrid: learned alpha in layer 0, a NoPE dense layer 1 (alpha in layer 0 only)."""
    return shared_run(tmp_path_factory, "hybrid")


def read_events(log_dir: Path):
    """Every scalar, image and tensor of a run's TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import (
        IMAGES,
        SCALARS,
        TENSORS,
        EventAccumulator,
    )

    events = EventAccumulator(str(log_dir), size_guidance={SCALARS: 0, IMAGES: 0, TENSORS: 0})
    events.Reload()
    return events


def scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    """tag -> step -> value (the last value written at a step)."""
    events = read_events(log_dir)
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}


def end_of_fit_scalars(log_dir: Path, step: int) -> dict[str, dict[int, float]]:
    """The end-of-fit evaluations' scalars: their own run ``<run>/evals/fit-step<N>``."""
    return scalars(Path(log_dir) / "evals" / f"fit-step{step}")


def custom_scalar_charts(log_dir) -> dict[str, list[str]]:
    """The run's one Custom Scalars layout: chart title -> its tag patterns."""
    from tensorboard.plugins.custom_scalar import layout_pb2

    events = read_events(log_dir)
    assert "custom_scalars__config__" in events.Tags()["tensors"]
    [event] = events.Tensors("custom_scalars__config__")
    layout = layout_pb2.Layout.FromString(event.tensor_proto.string_val[0])
    return {c.title: list(c.multiline.tag) for cat in layout.category for c in cat.chart}
