"""Which distances a model's attention reaches: each layer's attended distances at a length (a
learned alpha at its starting value), their union over layers, how many lie beyond the window,
and the distances two layers reach composed (the residual stream carries a layer's output to
every later layer; distance 0 is in every layer, so single hops are included); and, for a
recorded run, its layers rebuilt from the config it recorded, the distinct key rows a query
reads, and its reach over the distances its held-out examples actually hold."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lit_sparse import ConfigError
from lit_sparse.attention import union_distances
from lit_sparse.io import markdown_table
from lit_sparse.parsing import ModelSpec
from lit_sparse.tasks import IGNORE_INDEX

__all__ = [
    "Coverage",
    "compute_coverage",
    "example_distances",
    "format_ranges",
    "one_hop_reach",
    "recorded_patterns",
    "rows_read",
    "sampled_coverage",
    "two_hop",
]


def format_ranges(values: Sequence[int]) -> str:
    """Sorted distinct integers with runs of 3 or more folded: ``0..8, 13, 21``."""
    parts: list[str] = []
    consecutive = itertools.groupby(enumerate(sorted(set(values))), lambda iv: iv[1] - iv[0])
    for _, group in consecutive:
        run = [v for _, v in group]
        parts += [f"{run[0]}..{run[-1]}"] if len(run) >= 3 else [str(v) for v in run]
    return ", ".join(parts) if parts else "none"


def two_hop(per_layer: Sequence[Sequence[int]], length: int) -> list[int]:
    """The two-hop distances (a + b for a in layer i, b in any later layer j,
    a + b <= length - 1), computed by convolving each layer's indicator with the union of
    the layers before it: fast enough for dense layers at long lengths."""
    reach = np.zeros(length, dtype=bool)
    earlier = np.zeros(length, dtype=bool)
    for index, layer in enumerate(per_layer):
        here = np.zeros(length, dtype=bool)
        here[[d for d in layer if d < length]] = True
        if index:
            sums = np.convolve(earlier.astype(np.float64), here.astype(np.float64))[:length]
            reach |= sums > 0.5
        earlier |= here
    return np.flatnonzero(reach).tolist()


@dataclass
class Coverage:
    """Distances of every layer of one model at one length."""

    description: str
    length: int
    training_length: int
    window: int | None
    """The plugin's window W (None when it has none, e.g. dense)."""
    alphas: list[float | None]
    layers: list[list[int]]
    union: list[int]
    two_hop: list[int] | None = None
    notes: list[str] = field(default_factory=list)

    def beyond(self, values: Sequence[int]) -> int:
        """How many of ``values`` lie beyond the window (all of them without a window)."""
        return len(values) if self.window is None else sum(1 for d in values if d > self.window)

    def _counted(self, values: Sequence[int]) -> dict[str, Any]:
        """``values`` with their count and how many lie beyond the window."""
        return {"distances": values, "count": len(values), "beyond_window": self.beyond(values)}

    def as_dict(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "length": self.length,
            "training_length": self.training_length,
            "window": self.window,
            "layers": [
                {"alpha": a, **self._counted(d)}
                for a, d in zip(self.alphas, self.layers, strict=True)
            ],
            "union": self._counted(self.union),
            "two_hop": None if self.two_hop is None else self._counted(self.two_hop),
        }

    def to_text(self) -> str:
        window = "no window" if self.window is None else f"W={self.window}"
        at = f"T={self.length}"
        if self.length != self.training_length:
            at += f" (trained at {self.training_length})"
        lines = [f"{self.description}; {len(self.layers)} layers; {at}", ""]
        rows = [
            [
                str(index),
                "-" if alpha is None else f"{alpha:.4f}",
                str(len(values)),
                str(self.beyond(values)),
                format_ranges(values),
            ]
            for index, (alpha, values) in enumerate(zip(self.alphas, self.layers, strict=True))
        ]
        header = ["layer", "alpha", "count", ">W", "distances"]
        lines += [markdown_table(header, rows, align="rrrrl"), ""]
        lines.append(
            f"union over {len(self.layers)} layers: {len(self.union)} distances, "
            f"{self.beyond(self.union)} beyond the window ({window})"
        )
        lines += _wrapped(format_ranges(self.union))
        if self.two_hop is not None:
            covered = 100.0 * len(self.two_hop) / self.length
            lines.append("")
            lines.append(
                f"two hops (a layer, then any later layer): {len(self.two_hop)} distances, "
                f"{self.beyond(self.two_hop)} beyond the window; "
                f"{covered:.1f} % of 0..{self.length - 1}"
            )
            lines += _wrapped(format_ranges(self.two_hop))
        lines += self.notes
        return "\n".join(lines)


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, width=96, initial_indent="  ", subsequent_indent="  ")


def compute_coverage(spec: ModelSpec, length: int | None = None, hops: int = 1) -> Coverage:
    """Distances of every layer of ``spec``'s model at ``length`` (default: training length)."""
    if hops not in (1, 2):
        raise ConfigError(f"--hops={hops}: expected 1 or 2")
    training_length = spec.seq_len
    length = training_length if length is None else length
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ConfigError(f"--length={length!r}: expected a positive integer")
    patterns = spec.patterns()
    layers = [pattern.distances(length) for pattern in patterns]
    alphas = [None if p.alpha is None else float(p.alpha.detach()) for p in patterns]
    local = getattr(spec.attention, "local_attention", spec.attention)  # a hybrid's local plugin
    window = getattr(local, "window", None)
    notes = []
    if getattr(getattr(local, "schedule", None), "name", None) == "learned":
        notes.append(
            "note: learned alpha, shown at its starting value (a trained run's distances: "
            "lit_sparse.load_run(run_dir).distances())"
        )
    plugins = (local, getattr(spec.attention, "global_attention", None))
    if any(type(plugin).name == "bigbird" for plugin in plugins if plugin is not None):
        notes.append(
            "note: BigBird's global and random keys are absolute positions, not distances; "
            "only its window is listed"
        )
    return Coverage(
        description=spec.describe(),
        length=length,
        training_length=training_length,
        window=window,
        alphas=alphas,
        layers=layers,
        union=union_distances(layers),
        two_hop=two_hop(layers, length) if hops == 2 else None,
        notes=notes,
    )


# ------------------------------------------------------------------- a recorded run
def recorded_patterns(
    attention: Mapping[str, Any],
    n_layers: int,
    training_length: int,
    new_offsets: str | None = None,
    alphas: Sequence[float] | None = None,
) -> list:
    """Every layer's pattern of a run from its recorded ``{class_path, init_args}``: under
    ``new_offsets`` (where the plugin has the option), a learned layer's alpha set to
    ``alphas`` (the run's last recorded values)."""
    from lit_sparse.attention import build_attention

    plugin = build_attention(attention)
    if new_offsets is not None and plugin.new_offsets_policy() is not None:
        plugin = plugin.with_new_offsets(new_offsets)
    patterns = [plugin.build(layer, n_layers, training_length) for layer in range(n_layers)]
    # a trajectory holds the layers with an alpha, in order (a hybrid's dense layers have none)
    with_alpha = [pattern for pattern in patterns if pattern.alpha is not None]
    for pattern, alpha in zip(with_alpha, alphas or [], strict=False):
        if hasattr(pattern, "set_alpha"):  # a learned layer
            pattern.set_alpha(alpha)
    return patterns


def rows_read(pattern, length: int) -> int:
    """The distinct key rows the last query of a ``length`` sequence reads: its exact
    distances, both rows of every kept interpolated rung, its absolute keys (a pattern
    without slots, dense: every row). A learned rung is one slot but two rows."""
    slots = getattr(pattern, "slots", None)
    if not callable(slots):
        return length
    keys = slots(length, "cpu")
    rows = set(keys.distances.tolist())
    if keys.rung_lo is not None:
        kept = keys.rung_lo[keys.rung_valid] if keys.rung_valid is not None else keys.rung_lo
        for low in kept.tolist():
            rows |= {low, low + 1}
    return len({d for d in rows if 0 <= d < length}) + keys.n_absolute


def example_distances(inputs, labels, ignore_index: int = IGNORE_INDEX) -> np.ndarray:
    """(Q,) the key-to-query distance of every asked position, example by example: from the
    query back to its key's first occurrence (the query repeats the key; the distance task's
    filler never holds it, and MQAR's pairs come before any filler). One a distance-task
    example; kv an MQAR example, whose value sits one after its key."""
    x, y = np.asarray(inputs), np.asarray(labels)
    asked = y != ignore_index
    if not asked.any(axis=1).all():
        raise ConfigError("example_distances: an example has no asked position")
    rows, query = np.nonzero(asked)
    keys = x[rows, query]
    first = (x[rows] == keys[:, None]).argmax(axis=1)
    return query - first


def one_hop_reach(per_layer: Sequence[Sequence[int]], length: int) -> np.ndarray:
    """(length,) booleans: the distances a layer after the first reads directly (their
    union). The first cannot retrieve by key: a value learns its key (one back) there."""
    reach = np.zeros(length, dtype=bool)
    reach[[d for d in union_distances(per_layer[1:]) if 0 <= d < length]] = True
    return reach


def sampled_coverage(reach: np.ndarray, distances: Sequence[int]) -> float | None:
    """The share of the sampled key-to-query ``distances`` d whose value, d - 1 back from
    the query, lies in ``reach`` (:func:`lit_sparse.attention.composed_reach`); None without
    samples."""
    d = np.asarray(distances, dtype=np.int64)
    if not d.size:
        return None
    return float(reach[np.clip(d - 1, 0, len(reach) - 1)].mean())
