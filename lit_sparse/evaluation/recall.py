"""Recall accuracy at several evaluation lengths and ``new_offsets`` policies: every held-out set
at a length is scored at its labelled positions, beside what the pattern offers there (keys per
query, cache rows, the share of each distance bucket reached by composition)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lit_sparse.attention.offsets import composed_reach
from lit_sparse.errors import ConfigError, check_format
from lit_sparse.evaluation.extrapolation import evaluating, extrapolation_lengths, with_new_offsets
from lit_sparse.io.tables import markdown_table
from lit_sparse.metrics import IGNORE_INDEX, RecallAccuracy, labelled_counts
from lit_sparse.model import LanguageModel
from lit_sparse.sharding import gathered

FORMAT = "lit_sparse.recall/1"
POLICIES = ("use", "drop")


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


@dataclass
class RecallResult:
    """Recall of one model on every held-out set, at several lengths and policies."""

    training_length: int
    lengths: list[int]
    policies: list[str]
    """The ``new_offsets`` policies evaluated (``use``, ``drop``)."""
    has_new_offsets: bool
    """Whether the attention has the option (without it, one policy is scored)."""
    scores: dict[str, dict[int, dict[str, dict[str, float | int | None]]]]
    """policy -> length -> set -> {accuracy, exact, examples, coverage}."""
    distances: dict[str, list[int] | None] = field(default_factory=dict)
    """set -> its [low, high] key-to-query distances (None: not a distance bucket)."""
    offer: dict[str, dict[int, dict[str, list[int]]]] = field(default_factory=dict)
    """policy -> length -> {keys_per_query, cache_rows}: per layer."""
    step: int | None = None
    checkpoint: str | None = None

    @property
    def sets(self) -> list[str]:
        """Every set at any length, in the order they first appear."""
        by_sets = (by_set for by_length in self.scores.values() for by_set in by_length.values())
        return list(dict.fromkeys(name for by_set in by_sets for name in by_set))

    def cell(self, policy: str, length: int, set_name: str) -> dict[str, Any] | None:
        return self.scores.get(policy, {}).get(length, {}).get(set_name)

    def accuracy(self, policy: str, length: int, set_name: str, key: str = "accuracy") -> float:
        """``accuracy`` (or ``exact``, ``coverage``) of a set, nan where it was not scored."""
        cell = self.cell(policy, length, set_name)
        value = None if cell is None else cell.get(key)
        return math.nan if value is None else float(value)

    def metrics(self, prefix: str = "recall") -> dict[str, float]:
        """``<prefix>/<policy>/acc/<set>/<T>`` for every score (finite values)."""
        out = {
            f"{prefix}/{policy}/acc/{name}/{length}": self.accuracy(policy, length, name)
            for policy in self.policies
            for length in self.lengths
            for name in self.scores[policy].get(length, {})
        }
        return {key: value for key, value in out.items() if math.isfinite(value)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (format ``lit_sparse.recall/1``)."""
        return {
            "format": FORMAT,
            "step": self.step,
            "checkpoint": self.checkpoint,
            "training_length": self.training_length,
            "lengths": list(self.lengths),
            "policies": list(self.policies),
            "has_new_offsets": self.has_new_offsets,
            "distances": dict(self.distances),
            "offer": {p: {str(t): dict(v) for t, v in by.items()} for p, by in self.offer.items()},
            "scores": {
                p: {
                    str(t): {
                        name: {k: (_num(v) if isinstance(v, float) else v) for k, v in c.items()}
                        for name, c in by_set.items()
                    }
                    for t, by_set in by_length.items()
                }
                for p, by_length in self.scores.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecallResult:
        check_format(data, FORMAT, "a recall table")
        return cls(
            training_length=int(data["training_length"]),
            lengths=[int(t) for t in data["lengths"]],
            policies=list(data["policies"]),
            has_new_offsets=bool(data["has_new_offsets"]),
            scores={
                p: {int(t): dict(by_set) for t, by_set in by_length.items()}
                for p, by_length in data["scores"].items()
            },
            distances=dict(data.get("distances") or {}),
            offer={
                p: {int(t): v for t, v in by.items()} for p, by in data.get("offer", {}).items()
            },
            step=data.get("step"),
            checkpoint=data.get("checkpoint"),
        )

    def to_markdown(self) -> str:
        """Accuracy per set (rows) and length (columns), one table per policy."""
        train = self.training_length
        lines = [
            "## Recall",
            "",
            f"Accuracy at the labelled positions (per example, averaged over examples) of "
            f"every held-out set at each evaluation length (training length {train}"
            + (f"; step {self.step}" if self.step is not None else "")
            + (f"; checkpoint {self.checkpoint}" if self.checkpoint else "")
            + "); cov: the share of a distance bucket the layers reach by composition.",
        ]
        header = ["set", *(f"{t} ({t / train:g}x)" for t in self.lengths)]
        for policy in self.policies:
            rows = [
                [name, *(self._text(policy, t, name) for t in self.lengths)] for name in self.sets
            ]
            same = "" if self.has_new_offsets else " (no new_offsets option: as trained)"
            lines += ["", f"new_offsets={policy}{same}:", ""]
            lines.append(markdown_table(header, rows, align="l" + "r" * len(self.lengths)))
        return "\n".join(lines) + "\n"

    def _text(self, policy: str, length: int, set_name: str) -> str:
        """A set's accuracy at ``length`` and its coverage if it is a distance bucket."""
        if self.cell(policy, length, set_name) is None:
            return "-"
        coverage = self.accuracy(policy, length, set_name, "coverage")
        cov = f" (cov {coverage:.2f})" if math.isfinite(coverage) else ""
        return f"{self.accuracy(policy, length, set_name):.3f}{cov}"


def pattern_offer(model: LanguageModel, length: int) -> dict[str, list[int]]:
    """Per layer at ``length``: keys per query and the rows its decoding cache keeps."""
    device = next(model.parameters()).device
    keys = []
    for pattern in model.patterns:
        slots = getattr(pattern, "slots", None)
        keys.append(slots(length, device).keys_per_query if callable(slots) else length)
    cache = model.new_cache(1, length)
    rows = [layer.cache.capacity if hasattr(layer, "cache") else length for layer in cache.layers]
    return {"keys_per_query": keys, "cache_rows": rows}


def _coverage(reach: np.ndarray, bucket: Sequence[int] | None) -> float | None:
    """The share of a bucket's distances d (up to length - 2) with d - 1 in ``reach``."""
    if bucket is None:
        return None
    low, high = int(bucket[0]), min(int(bucket[1]), reach.shape[0] - 2)
    return float(reach[low - 1 : high].mean()) if high >= low else None


def _score(
    model: LanguageModel, loaders: Mapping[str, Any], names: list[str], device: torch.device
) -> Tensor:
    """(3, sets) float64: this process's per-example accuracy sum, exact count, examples."""
    local = torch.zeros(3, len(names), dtype=torch.float64)
    for i, name in enumerate(names):
        metric = RecallAccuracy().to(device)
        metric.sync_on_compute = False  # this rank's counts; the caller reduces once
        for x, y in loaders[name]:
            asked = (y != IGNORE_INDEX).any(0).nonzero()
            if not asked.numel():
                continue
            end = int(asked.max()) + 1  # causal: the tokens after the last question change
            x, y = x[:, :end].to(device), y[:, :end].to(device)  # no answer; not scored
            mask = y != IGNORE_INDEX
            logits = model.head(model.features(x)[mask])  # (N, V) at the asked positions
            metric.update(*labelled_counts(logits, mask, y[mask]))
        local[0, i] = metric.total.double().cpu()
        local[1, i] = float(metric.exact)
        local[2, i] = float(metric.examples)
    return local


def available_memory() -> int | None:
    """``MemAvailable`` in bytes (None without /proc/meminfo)."""
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def scoring_bytes(
    model: nn.Module, datamodule: Any, length: int, batch_tokens: int | None = None
) -> int:
    """A lower bound on scoring's memory at ``length``: the held-out examples and one batch's
    float32 activations."""
    config = getattr(model, "model", model).config
    examples = len(datamodule.set_names_at(length)) * datamodule.examples_at(length)
    tokens = batch_tokens or datamodule.val_batch_size * datamodule.seq_len
    rows = max(1, tokens // length) * length
    width = 2 * config.d_model + (config.n_heads + 2 * config.n_kv_heads) * config.head_dim
    width += 2 * config.ffn_width
    return examples * length * 2 * 8 + rows * width * 4


def _check_lengths(
    model: nn.Module, datamodule: Any, lengths: Sequence[int], batch_tokens: int | None
) -> None:
    """One ConfigError line for a length the task cannot make or whose scoring will not fit."""
    free = available_memory()
    for length in lengths:
        datamodule.check_length(length)
        need = scoring_bytes(model, datamodule, length, batch_tokens)
        if free is not None and need > free:
            raise ConfigError(
                f"length {length:,}: scoring needs at least {need / 2**20:,.0f} MiB (its "
                f"held-out examples and one forward), more than the {free / 2**20:,.0f} MiB "
                "of memory available; use shorter lengths"
            )


def evaluate_recall(
    model: nn.Module,
    datamodule: Any,
    lengths: Sequence[int],
    policies: Sequence[str] = POLICIES,
    batch_tokens: int | None = None,
    reduce: Callable[[Tensor], Tensor] | None = None,
    context: Callable[[], contextlib.AbstractContextManager] | None = None,
    progress: Callable[[str], None] | None = None,
) -> RecallResult:
    """Score ``model`` on every held-out set of ``datamodule`` at every length and policy.

    Args:
        model: a ``LanguageModel`` or a module holding one as ``.model``.
        datamodule: a :class:`lit_sparse.tasks.RecallDataModule`.
        lengths: evaluation lengths.
        policies: ``new_offsets`` policies, among ``use`` and ``drop``.
        batch_tokens: tokens per batch (default: the validation batch's).
        reduce: sums a tensor over processes, called exactly once on every rank.
        context: a context manager factory for the forward (the trainer's precision).
        progress: called with a line per (policy, length) scored.
    """
    inner: LanguageModel = getattr(model, "model", model)
    training_length = inner.config.context_length
    lengths = extrapolation_lengths(training_length, lengths=lengths)
    _check_lengths(inner, datamodule, lengths, batch_tokens)
    policies = list(dict.fromkeys(policies))
    bad = [p for p in policies if p not in POLICIES]
    if not policies or bad:
        raise ConfigError(f"new_offsets={policies!r}: expected one or more of use, drop")
    has_option = inner.attention.new_offsets_policy() is not None
    scored = policies if has_option else policies[:1]  # one model without the option
    tokens = batch_tokens or datamodule.val_batch_size * datamodule.seq_len
    device = next(inner.parameters()).device
    names_at = {t: list(datamodule.set_names_at(t)) for t in lengths}
    columns = [(p, t, name) for p in scored for t in lengths for name in names_at[t]]
    local = torch.zeros(3, len(columns), dtype=torch.float64)
    models = {p: with_new_offsets(inner, p if has_option else None) for p in scored}
    start = 0
    with gathered(inner):  # sharded: each process runs the forwards of its own examples
        for policy, evaluated in models.items():
            with evaluating(evaluated, context):
                for length in lengths:
                    names = names_at[length]
                    loaders = datamodule.loaders_at(length, max(1, tokens // length))
                    if progress is not None:
                        progress(
                            f"recall: new_offsets={policy}, length {length}: {len(names)} sets"
                        )
                    local[:, start : start + len(names)] = _score(evaluated, loaders, names, device)
                    start += len(names)
    total = (reduce(local.to(device)) if reduce is not None else local).detach().cpu()
    buckets = {name: datamodule.distance_range(name) for t in lengths for name in names_at[t]}
    scores: dict[str, dict[int, dict[str, dict[str, Any]]]] = {p: {} for p in policies}
    reach = {(p, t): composed_reach(models[p].distances(t), t) for p in scored for t in lengths}
    for j, (policy, length, name) in enumerate(columns):
        examples = int(round(float(total[2, j])))
        scores[policy].setdefault(length, {})[name] = {
            "accuracy": float(total[0, j]) / examples if examples else None,
            "exact": float(total[1, j]) / examples if examples else None,
            "examples": examples,
            "coverage": _coverage(reach[policy, length], buckets[name]),
        }
    offer = {p: {t: pattern_offer(models[p], t) for t in lengths} for p in scored}
    for policy in policies[len(scored) :]:  # without the option: the same model, once
        scores[policy], offer[policy] = scores[scored[0]], offer[scored[0]]
    distances = {n: None if b is None else [int(b[0]), int(b[1])] for n, b in buckets.items()}
    return RecallResult(
        training_length=training_length,
        lengths=lengths,
        policies=policies,
        has_new_offsets=has_option,
        scores=scores,
        distances=distances,
        offer=offer,
    )
