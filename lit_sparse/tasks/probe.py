"""The retrieval probe (paper section 4.4, table 2), one task in one file: its data (marked
shift-copy sequences), its metric and its training module.

A token is a payload ``p ~ U[0, P)`` plus a marker ``c`` times P; the target at t is
``x[t - D[c_t]]`` with ``c_t = x[t] // P`` (label -100 where ``t < D[c_t]``). The held-out set
comes from its own seed, so runs of any training seed are scored on the same sequences.
``acc@d``: the share of held-out positions whose marker selects d, and that have a source, where
the argmax is the source token ``x[t - d]``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric

from lit_sparse.attention import AttentionPlugin
from lit_sparse.config import ModelConfig
from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError, NonFiniteLossError
from lit_sparse.model import token_nll
from lit_sparse.module import LitLanguageModel
from lit_sparse.tasks.registry import register_task
from lit_sparse.tasks.synthetic import IGNORE_INDEX, Examples, RecallDataModule


def shift_copy_targets(x: Tensor, distances: Sequence[int], payload: int) -> Tensor:
    """Targets (B, T) of x (B, T): ``y[t] = x[t - D[x[t] // P]]``, ``IGNORE_INDEX`` before it."""
    length = x.shape[-1]
    shifts = torch.as_tensor(list(distances), device=x.device)[x // payload]  # (B, T) D of c_t
    t = torch.arange(length, device=x.device).expand_as(x)
    source = t - shifts
    y = torch.gather(x, -1, source.clamp(min=0))
    return torch.where(source >= 0, y, torch.full_like(y, IGNORE_INDEX))


def marked_shift_copy(
    batch: int,
    length: int = 512,
    distances: Sequence[int] = (200, 350),
    payload: int = 256,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """``batch`` probe sequences: x (B, T) tokens ``p + P * c`` and their targets y (B, T)."""
    p = torch.randint(0, payload, (batch, length), generator=generator)
    c = torch.randint(0, len(distances), (batch, length), generator=generator)
    x = p + payload * c
    return x, shift_copy_targets(x, distances, payload)


def batch_generator(*keys: int) -> torch.Generator:
    """A torch generator seeded from ``keys`` mixed into 32 bits (torch keeps a seed's low 32)."""
    state = np.random.SeedSequence([k & 0xFFFFFFFF for k in keys]).generate_state(1)[0]
    return torch.Generator().manual_seed(int(state))


@register_task("probe")
class ProbeDataModule(RecallDataModule):
    """Marked shift-copy sequences for the retrieval probe.

    Args:
        seq_len: T, tokens per sequence (the paper: 512).
        distances: D, the copy distance of each marker value (the paper: 200 and 350).
        payload: P, payload values per marker (the paper: 256; vocabulary P x len(D)).
        batch_size: training sequences per batch (the paper: 2).
        val_sequences: held-out sequences accuracy is measured on (at least 64).
        val_batch_size: held-out sequences per validation batch.
        seed: seed of the training stream (the probe command sets it to the run's seed).
        val_seed: seed of the held-out set (the same for every run).
    """

    @classmethod
    def kit_options(cls) -> dict[str, Any]:
        return {"seq_len": 64, "distances": [20, 30], "payload": 16, "val_sequences": 6}

    summary = "copy the token D[c] back, c the marker of the current token (the paper's probe)"
    sparse_labels = False
    """Every position with a source is asked."""

    def __init__(
        self,
        seq_len: int = 512,
        distances: list[int] | None = None,
        payload: int = 256,
        batch_size: int = 2,
        val_sequences: int = 64,
        val_batch_size: int = 16,
        seed: int = 0,
        val_seed: int = 1234,
    ):
        super().__init__(seq_len, batch_size, val_batch_size, seed, val_seed)
        distances = [200, 350] if distances is None else [int(d) for d in distances]
        check_int("data.payload", payload)
        self.val_sequences = check_int("data.val_sequences", val_sequences)
        if not distances or any(d < 1 or d >= seq_len for d in distances):
            raise ConfigError(
                f"data.distances={distances}: expected one or more distances in 1..seq_len-1 "
                f"(seq_len={seq_len})"
            )
        if len(set(distances)) != len(distances):
            raise ConfigError(f"data.distances={distances}: expected distinct distances")
        self.distances, self.payload = distances, payload
        self.vocab_size = self.model_vocab_size(payload, distances)
        self.val_examples, self.min_examples = val_sequences, min(val_sequences, 8)

    @classmethod
    def model_vocab_size(
        cls, payload: int = 256, distances: list[int] | None = None, **init_args: Any
    ) -> int:
        """The vocabulary these init args imply: payload x number of markers."""
        return payload * len([200, 350] if distances is None else distances)

    @classmethod
    def impossible_settings(cls) -> list[dict[str, Any]]:
        return [{"distances": [0]}, {"distances": [512]}, {"payload": 0}]

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        """Batch ``seed`` = (seed, rank, n) is drawn from ``batch_generator(*seed)``."""
        return marked_shift_copy(
            n, self.seq_len, self.distances, self.payload, batch_generator(*seed)
        )

    def check_length(self, length: int) -> None:
        if length <= min(self.distances):
            raise ConfigError(
                f"length {length}: the probe evaluates lengths > {min(self.distances)} (its "
                "shortest copy distance: no position has a source before it)"
            )

    def set_names_at(self, length: int) -> list[str]:
        return ["probe"] if length > min(self.distances) else []

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        """At the training length the set of ``val_seed`` alone; at other lengths of ``seed``."""
        if length == self.seq_len:
            generator = torch.Generator().manual_seed(self.val_seed)
        else:
            generator = batch_generator(*seed)
        n = self.examples_at(length)
        return marked_shift_copy(n, length, self.distances, self.payload, generator)

    def held_out(self) -> tuple[Tensor, Tensor]:
        """The held-out sequences (x, y), each (val_sequences, T)."""
        return self.recall_sets()["probe"]


PROBE_MODEL = ModelConfig(
    vocab_size=512,
    context_length=512,
    n_layers=2,
    d_model=256,
    n_heads=4,
    n_kv_heads=2,
    head_dim=64,
)
"""The probe's model: d_model 256, 4 heads, 2 KV heads (depth is set per config)."""


def probe_counts(
    pred: Tensor, x: Tensor, y: Tensor, distances: Sequence[int], payload: int
) -> tuple[Tensor, Tensor]:
    """(correct, scored) per distance (D,) of ``pred`` (B, T) against ``y`` (B, T), at positions
    whose marker (``x // payload``) selects it and with a source (``y != -100``)."""
    marker = x // payload
    scored = y != IGNORE_INDEX
    hit = (pred == y) & scored
    ks = torch.arange(len(distances), device=x.device)[:, None, None]  # (D, 1, 1)
    mine = marker[None] == ks  # (D, B, T)
    return (mine & hit).sum(dim=(1, 2)), (mine & scored).sum(dim=(1, 2))


class ProbeAccuracy(Metric):
    """acc@d per copy distance d; counts add across processes."""

    full_state_update = False

    def __init__(self, distances: Sequence[int], payload: int):
        super().__init__()
        self.distances, self.payload = [int(d) for d in distances], int(payload)
        n = len(self.distances)
        self.add_state("correct", torch.zeros(n, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("scored", torch.zeros(n, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("sequences", torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, logits: Tensor, x: Tensor, y: Tensor) -> None:
        correct, scored = probe_counts(logits.argmax(-1), x, y, self.distances, self.payload)
        self.correct += correct
        self.scored += scored
        self.sequences += x.shape[0]

    def compute(self) -> dict[str, Any]:
        acc = self.correct.double() / self.scored.clamp(min=1).double()
        return {
            "accuracy": {d: float(a) for d, a in zip(self.distances, acc, strict=True)},
            "positions": {d: int(n) for d, n in zip(self.distances, self.scored, strict=True)},
            "sequences": int(self.sequences),
        }


@dataclass
class ProbeScores:
    """One evaluation of a probe model on the held-out sequences."""

    accuracy: dict[int, float]
    """acc@d for every copy distance d."""
    positions: dict[int, int]
    """Positions scored per distance."""
    sequences: int
    """Held-out sequences scored."""
    loss: float
    """Mean cross-entropy over the positions that have a source."""
    alphas: list[float] | None = None
    """Every layer's alpha at evaluation."""
    step: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def alpha_range(self) -> tuple[float, float] | None:
        return None if not self.alphas else (min(self.alphas), max(self.alphas))

    def as_dict(self) -> dict[str, Any]:
        return {
            "accuracy": {str(d): a for d, a in self.accuracy.items()},
            "positions": {str(d): n for d, n in self.positions.items()},
            "sequences": self.sequences,
            "loss": self.loss,
            "alphas": self.alphas,
            "alpha_range": self.alpha_range,
            "step": self.step,
            **self.extra,
        }


class ProbeModule(LitLanguageModel):
    """The probe's LightningModule: mean cross-entropy at positions with a source, the paper's
    recipe as defaults. Needs a datamodule with ``distances`` and ``payload``; after each
    validation ``scores`` holds the :class:`ProbeScores` (logged as ``probe/acc@<d>``)."""

    def __init__(
        self,
        arch: ModelConfig = PROBE_MODEL,
        attention: AttentionPlugin | None = None,
        lr: float = 1e-3,
        min_lr_ratio: float = 1.0,
        warmup_steps: int = 0,
        max_steps: int = 2500,
        weight_decay: float = 0.01,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        """
        Args:
            arch: the transformer's shape (vocab_size and context_length come from the data).
            attention: the attention plugin (default: learned Fibonacci alpha, W=8, K=15).
            lr: learning rate (constant with the defaults).
            min_lr_ratio: the cosine ends at lr * min_lr_ratio (1: constant).
            warmup_steps: linear warmup length in optimizer steps.
            max_steps: training length in optimizer steps (the cosine and width anneal end there).
            weight_decay: AdamW decay on tensors with >= 2 dims (never alpha's theta).
            betas: AdamW betas.
            eps: AdamW epsilon.
        """
        if attention is None:
            from lit_sparse.attention import FibonacciAttention

            attention = FibonacciAttention(window=8, n_rungs=15, schedule="learned")
        super().__init__(
            arch, attention, lr, min_lr_ratio, warmup_steps, max_steps, weight_decay, betas, eps
        )
        self.scores: ProbeScores | None = None
        self.accuracy: ProbeAccuracy | None = None

    def _probe_data(self) -> tuple[list[int], int]:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        distances = getattr(datamodule, "distances", None)
        payload = getattr(datamodule, "payload", None)
        if distances is None or payload is None:
            raise ConfigError(
                "ProbeModule needs a datamodule with distances and payload "
                "(lit_sparse.tasks.probe.ProbeDataModule)"
            )
        return list(distances), int(payload)

    def probe_nll(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """Logits (B, T, V) and per-position NLL (B, T), 0 where y is -100."""
        logits = self.model(x)
        return logits, token_nll(logits, y, ignore_index=IGNORE_INDEX)

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        """Anneal a Gaussian rung read's width from the optimizer step (a no-op otherwise)."""
        progress = self.global_step / max(1, self.hparams.max_steps)
        for pattern in self.model.patterns:
            if hasattr(pattern, "set_progress"):
                pattern.set_progress(progress)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        _, nll = self.probe_nll(x, y)
        loss = nll.sum() / (y != IGNORE_INDEX).sum().clamp(min=1)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(self._non_finite_message(loss, batch_idx))
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def _rung_widths(self) -> dict[str, Any]:
        """{"rung_widths": every layer's Gaussian band width} when the read is Gaussian."""
        widths = [float(p.rung_width) for p in self.model.patterns if hasattr(p, "rung_width")]
        return {"rung_widths": widths} if widths else {}

    def on_validation_epoch_start(self) -> None:
        distances, payload = self._probe_data()
        self.accuracy = ProbeAccuracy(distances, payload).to(self.device)

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y = batch
        logits, nll = self.probe_nll(x, y)
        self.val_nll[self.val_set_names()[dataloader_idx]].update(nll[y != IGNORE_INDEX])
        self.accuracy.update(logits, x, y)

    def on_validation_epoch_end(self) -> None:
        name = self.val_set_names()[0]
        loss = float(self.val_nll[name].compute())
        super().on_validation_epoch_end()  # logs val/loss/<set>, val/ppl/<set> and resets
        result = self.accuracy.compute()
        self.accuracy.reset()
        alphas = self.model.alphas()
        self.scores = ProbeScores(
            **result,  # accuracy, positions, sequences
            loss=loss,
            alphas=None if alphas is None else [float(a) for a in alphas],
            step=self.global_step,
            extra=self._rung_widths(),
        )
        for d, value in result["accuracy"].items():
            self.log(f"probe/acc@{d}", value)
        self.log("probe/sequences", float(result["sequences"]))
