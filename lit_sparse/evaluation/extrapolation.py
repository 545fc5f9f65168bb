"""Length extrapolation: the trained weights scored at multiples of the training length.

At each length T the model scores every held-out set's non-overlapping windows of T predictions
(RoPE and the patterns follow T); perplexity is exp of the token-weighted mean NLL. Ranks add
their sums in one ``reduce`` call."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from lit_sparse.errors import ConfigError, check_format
from lit_sparse.io.tables import markdown_table
from lit_sparse.model import LanguageModel, token_nll
from lit_sparse.sharding import full_state_dict, gathered

FORMAT = "lit_sparse.extrapolation/1"


def extrapolation_lengths(
    training_length: int,
    multiples: Iterable[float] = (1, 2, 4),
    lengths: Iterable[int] | None = None,
) -> list[int]:
    """Sorted distinct lengths: ``lengths``, else rounded multiples of the training length."""
    if lengths is None:
        lengths = [int(round(m * training_length)) for m in multiples]
    values = list(lengths)
    if not values:
        raise ConfigError("lengths: expected at least one evaluation length")
    bad = [v for v in values if isinstance(v, bool) or int(v) != v or v < 1]
    if bad:
        raise ConfigError(f"lengths: expected positive integers, got {bad}")
    return sorted({int(v) for v in values})


def with_new_offsets(model: LanguageModel, new_offsets: str | None) -> LanguageModel:
    """``model``'s weights rebuilt with ``new_offsets`` (the policy for distances seen only beyond
    the training length); ``model`` itself for None, its own policy, or "use" without the option."""
    if new_offsets is None:
        return model
    if new_offsets not in ("use", "drop"):
        raise ConfigError(f"new_offsets must be 'use' or 'drop', got {new_offsets!r}")
    attention = model.attention
    policy = attention.new_offsets_policy()
    if policy is None:
        if new_offsets == "use":
            return model
        raise ConfigError(
            f"new_offsets='drop': attention {type(attention).__name__} has no new_offsets "
            "option (FibonacciAttention has, and a hybrid holding one)"
        )
    if policy == new_offsets:
        return model
    rebuilt = LanguageModel(model.config, attention.with_new_offsets(new_offsets))
    rebuilt.load_state_dict(full_state_dict(model))  # a sharded model's whole weights
    return rebuilt.to(next(model.parameters()).device)


@contextlib.contextmanager
def evaluating(
    model: nn.Module, context: Callable[[], contextlib.AbstractContextManager] | None = None
) -> Iterator[None]:
    """``model`` in eval mode under ``torch.inference_mode`` and ``context()`` (the precision's),
    its training mode restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), context() if context is not None else contextlib.nullcontext():
            yield
    finally:
        model.train(was_training)


def format_distances(values: Sequence[int], limit: int = 8) -> str:
    """A short text for a list of distances: all of them, or the first few and a count."""
    shown = ", ".join(str(v) for v in values[:limit]) or "none"
    if len(values) <= limit:
        return shown
    return f"{shown}, ... ({len(values)} in {values[0]}..{values[-1]})"


@dataclass
class ExtrapolationResult:
    """Perplexity of one model at several evaluation lengths on every held-out set."""

    training_length: int
    lengths: list[int]
    nll: dict[str, dict[int, float]]
    """set -> length -> token-weighted mean NLL (nan where the set has no window)."""
    tokens: dict[str, dict[int, int]]
    """set -> length -> predicted tokens scored (all processes)."""
    windows: dict[str, dict[int, int]]
    """set -> length -> windows scored (all processes)."""
    unseen_distances: dict[int, dict[int, list[int]]] = field(default_factory=dict)
    """length -> layer -> distances attended there that training never used."""
    new_offsets: str | None = None
    """The policy evaluated, "use" or "drop" (None: the attention has no such option)."""
    step: int | None = None
    checkpoint: str | None = None

    @property
    def sets(self) -> list[str]:
        return list(self.nll)

    @property
    def reference_length(self) -> int:
        """The baseline of the changes: the training length if evaluated, else the shortest."""
        return self.training_length if self.training_length in self.lengths else self.lengths[0]

    def ppl(self, set_name: str, length: int) -> float:
        value = self.nll[set_name][length]
        return math.exp(value) if math.isfinite(value) else math.nan

    def change_pct(self, set_name: str, length: int) -> float:
        """Perplexity change against the reference length, in percent."""
        ref = self.ppl(set_name, self.reference_length)
        return 100.0 * (self.ppl(set_name, length) / ref - 1.0)

    def metrics(self, prefix: str = "extrap") -> dict[str, float]:
        """``<prefix>/ppl/<set>/<T>`` and ``<prefix>/ppl_change_pct/<set>/<T>`` (finite values)."""
        out: dict[str, float] = {}
        for name in self.sets:
            for length in self.lengths:
                out[f"{prefix}/ppl/{name}/{length}"] = self.ppl(name, length)
                if length != self.reference_length:
                    out[f"{prefix}/ppl_change_pct/{name}/{length}"] = self.change_pct(name, length)
        return {k: v for k, v in out.items() if math.isfinite(v)}

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (format ``lit_sparse.extrapolation/1``); nan becomes null."""

        def num(value: float) -> float | None:
            return value if math.isfinite(value) else None

        return {
            "format": FORMAT,
            "step": self.step,
            "checkpoint": self.checkpoint,
            "training_length": self.training_length,
            "reference_length": self.reference_length,
            "new_offsets": self.new_offsets,
            "lengths": list(self.lengths),
            "sets": {
                name: {
                    str(length): {
                        "nll": num(self.nll[name][length]),
                        "ppl": num(self.ppl(name, length)),
                        "change_pct": num(self.change_pct(name, length)),
                        "tokens": self.tokens[name][length],
                        "windows": self.windows[name][length],
                    }
                    for length in self.lengths
                }
                for name in self.sets
            },
            "unseen_distances": {
                str(length): {str(layer): list(d) for layer, d in layers.items()}
                for length, layers in self.unseen_distances.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExtrapolationResult:
        check_format(data, FORMAT, "an extrapolation table")

        def per_set(key: str, convert: Callable[[Any], Any]) -> dict[str, dict[int, Any]]:
            sets = data["sets"].items()
            return {n: {int(t): convert(v[key]) for t, v in per.items()} for n, per in sets}

        return cls(
            training_length=int(data["training_length"]),
            lengths=[int(v) for v in data["lengths"]],
            nll=per_set("nll", lambda value: math.nan if value is None else float(value)),
            tokens=per_set("tokens", int),
            windows=per_set("windows", int),
            unseen_distances={
                int(t): {int(layer): list(d) for layer, d in layers.items()}
                for t, layers in data.get("unseen_distances", {}).items()
            },
            new_offsets=data.get("new_offsets"),
            step=data.get("step"),
            checkpoint=data.get("checkpoint"),
        )

    def to_markdown(self) -> str:
        """Perplexity per set and length (with the change), and per layer the distances added."""
        ref, train = self.reference_length, self.training_length
        others = [t for t in self.lengths if t != ref]
        header = [
            "set",
            *(f"{t} ({t / train:g}x)" for t in self.lengths),
            *(f"{t} vs {ref}" for t in others),
        ]
        baseline = (
            f"changes against the training length {train}"
            if ref == train
            else f"changes against {ref}, the shortest length (the training length {train} "
            "was not evaluated)"
        )
        lines = [
            "## Length extrapolation",
            "",
            f"Perplexity on the held-out windows at each evaluation length ({baseline}"
            + (f"; new_offsets: {self.new_offsets}" if self.new_offsets else "")
            + (f"; step {self.step}" if self.step is not None else "")
            + (f"; checkpoint {self.checkpoint}" if self.checkpoint else "")
            + ").",
            "",
        ]
        rows = [
            [name]
            + [_finite(self.ppl(name, t), "{:.2f}") for t in self.lengths]
            + [_finite(self.change_pct(name, t), "{:+.1f} %") for t in others]
            for name in self.sets
        ]
        lines.append(markdown_table(header, rows, align="l" + "r" * (len(header) - 1)))
        windows = "; ".join(
            f"{name}: " + " / ".join(str(self.windows[name][t]) for t in self.lengths)
            for name in self.sets
        )
        lines += ["", f"Windows per length ({' / '.join(map(str, self.lengths))}): {windows}."]
        longer = [t for t in self.lengths if t in self.unseen_distances]
        if longer:
            layers = sorted({layer for t in longer for layer in self.unseen_distances[t]})
            lines += [
                "",
                "Distances attended at the longer lengths that training never used, per layer:",
                "",
            ]
            rows = [
                [str(layer)]
                + [format_distances(self.unseen_distances[t].get(layer, [])) for t in longer]
                for layer in layers
            ]
            lines.append(markdown_table(["layer", *map(str, longer)], rows))
        return "\n".join(lines) + "\n"


def _finite(value: float, form: str) -> str:
    return form.format(value) if math.isfinite(value) else "n/a"


def evaluate_lengths(
    model: nn.Module,
    datamodule: Any,
    lengths: Sequence[int],
    sets: Sequence[str] | None = None,
    new_offsets: str | None = None,
    batch_size: int | None = None,
    reduce: Callable[[Tensor], Tensor] | None = None,
    context: Callable[[], contextlib.AbstractContextManager] | None = None,
    progress: bool = False,
) -> ExtrapolationResult:
    """Score ``model`` on every held-out set at every length in ``lengths``.

    Args:
        model: a ``LanguageModel`` or a module holding one as ``.model`` (LitLanguageModel).
        datamodule: set up (under several processes, attached to the trainer), with
            ``val_set_names`` and ``val_windows_at(length, set, batch_size)``.
        lengths: evaluation lengths (predictions per window).
        sets: held-out sets to score (default all).
        new_offsets: "use" or "drop" to rebuild the model under that policy; None: as is.
        batch_size: windows per batch (default the datamodule's).
        reduce: sums a tensor over processes, called exactly once on every rank; None: one process.
        context: a context manager factory for the forward (the precision plugin's).
        progress: show a progress bar on stderr.
    """
    inner: LanguageModel = getattr(model, "model", model)
    lengths = extrapolation_lengths(inner.config.context_length, lengths=lengths)
    names = list(datamodule.val_set_names) if sets is None else list(sets)
    evaluated = with_new_offsets(inner, new_offsets)
    with gathered(evaluated):  # sharded: each process runs the forwards of its own windows
        local = _score_sets(evaluated, datamodule, names, lengths, batch_size, context, progress)
    total = (reduce(local) if reduce is not None else local).detach().cpu()
    training_length = inner.config.context_length
    return ExtrapolationResult(
        training_length=training_length,
        lengths=lengths,
        **_per_set_and_length(total, names, lengths),
        unseen_distances={
            length: {layer: list(d) for layer, d in evaluated.unseen_distances(length).items()}
            for length in lengths
            if length > training_length
        },
        new_offsets=new_offsets or evaluated.attention.new_offsets_policy(),
    )


def _score_sets(
    model: LanguageModel,
    datamodule: Any,
    names: list[str],
    lengths: list[int],
    batch_size: int | None,
    context: Callable[[], contextlib.AbstractContextManager] | None,
    progress: bool = False,
) -> Tensor:
    """This process's NLL sums and window counts, (2, sets, lengths) float64."""
    from tqdm.auto import tqdm

    device = next(model.parameters()).device
    local = torch.zeros(2, len(names), len(lengths), dtype=torch.float64, device=device)
    loaders = []
    for i, name in enumerate(names):
        for j, length in enumerate(lengths):
            try:
                loader = datamodule.val_windows_at(length, name, batch_size=batch_size)
            except ValueError:
                if name not in datamodule.val_set_names:
                    raise
                continue  # the set has no window this long: nan, on every rank
            loaders.append((i, j, loader))
    windows = sum(len(loader.dataset.window_indices()) for _, _, loader in loaders)
    bar = tqdm(
        total=windows, unit="window", desc="length extrapolation", disable=not progress or None
    )
    with bar, evaluating(model, context):
        for i, j, loader in loaders:
            bar.set_description(f"length extrapolation: {names[i]} at {lengths[j]}")
            for x, y in loader:
                nll = token_nll(model(x.to(device)), y.to(device))
                local[0, i, j] += nll.double().sum()
                local[1, i, j] += nll.shape[0]
                bar.update(nll.shape[0])
    return local


def _per_set_and_length(total: Tensor, names: list[str], lengths: list[int]) -> dict[str, Any]:
    """nll, tokens and windows (set -> length -> value) of the summed (2, sets, lengths) scores."""
    nll: dict[str, dict[int, float]] = {}
    tokens: dict[str, dict[int, int]] = {}
    windows: dict[str, dict[int, int]] = {}
    for i, name in enumerate(names):
        nll[name], tokens[name], windows[name] = {}, {}, {}
        for j, length in enumerate(lengths):
            count = windows[name][length] = int(round(float(total[1, i, j])))
            tokens[name][length] = count * length
            nll[name][length] = float(total[0, i, j]) / (count * length) if count else math.nan
    return {"nll": nll, "tokens": tokens, "windows": windows}
