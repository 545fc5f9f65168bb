"""The layer the seeded studies share (the cpu study: :mod:`~lit_sparse_studies.study.cpu_results`;
the recall study: :mod:`~lit_sparse_studies.study.recall_results`): a finished run of one seed with
its alpha trajectory, a variant's runs as spreads over seeds, reading a preset's runs with the
check that the runs of one task were trained alike, and what every study's tables share (the
verdict, the comparison cells, the header's lines, the alpha table).

Per variant, each quantity is a :class:`Spread` over the seeds: mean and sample standard
deviation (n - 1 in the denominator). The rule for "beyond the seed spread"
(:func:`beyond_spread`): two means differ beyond the spread when ``|mean_a - mean_b| > sd_a +
sd_b``; a quantity differs from zero (a change against 1x, an alpha drift) when ``|mean| >
sd``. With fewer than two seeds on a side the spread is unknown and nothing is marked.

The recall study replaces that screen with a bootstrap (:func:`bootstrap_means`): seeds are
resampled with replacement, and within each seed its held-out examples, as binomial draws
of each set's example count (the records hold a set's accuracy and count, not its examples);
an :class:`Interval` is the percentile interval of those draws.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lit_sparse import ConfigError, current_path
from lit_sparse.io import import_class, markdown_table
from lit_sparse_studies.study.preset import PresetRun, RunState, Task, Variant, run_status

__all__ = [
    "BOOTSTRAP_DRAWS",
    "Interval",
    "RunGroup",
    "SeedRun",
    "Spread",
    "VariantRuns",
    "alpha_table",
    "beyond_spread",
    "bootstrap_means",
    "collect_alike",
    "compared",
    "comparison_table",
    "complete_dir",
    "left_out",
    "lookup",
    "percentile_interval",
    "section",
    "seed_counts",
    "seed_picks",
    "verdict",
]


@dataclass(frozen=True)
class Spread:
    """One quantity over seeds (non-finite values are left out)."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Spread:
        return cls(tuple(float(v) for v in values if v is not None and math.isfinite(v)))

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def sd(self) -> float:
        """Sample standard deviation; nan with fewer than two values."""
        return statistics.stdev(self.values) if self.n >= 2 else math.nan

    def format(self, digits: int = 2, sign: bool = False) -> str:
        """``mean ± sd`` (``mean`` alone for one seed, ``-`` for none)."""
        if not self.n:
            return "-"
        plus = "+" if sign else ""
        text = f"{self.mean:{plus}.{digits}f}"
        return text if self.n < 2 else f"{text} ± {self.sd:.{digits}f}"


def beyond_spread(a: Spread, b: Spread | None = None) -> bool | None:
    """``|mean_a - mean_b| > sd_a + sd_b`` (b None: against zero, ``|mean_a| > sd_a``); None
    when a side has fewer than two seeds (no spread to compare with)."""
    if a.n < 2 or (b is not None and b.n < 2):
        return None
    if b is None:
        return abs(a.mean) > a.sd
    return abs(a.mean - b.mean) > a.sd + b.sd


BOOTSTRAP_DRAWS = 4000
"""Bootstrap draws per interval (the recall study's tables)."""


def seed_picks(rng: np.random.Generator, seeds: int, draws: int = BOOTSTRAP_DRAWS) -> np.ndarray:
    """(draws, seeds) seed indices drawn with replacement; share them between two
    quantities of the same runs (a run at 1x and at 64x) to pair the comparison."""
    if seeds < 1:
        raise ConfigError("bootstrap: no seed to resample")
    return rng.integers(0, seeds, size=(draws, seeds))


def bootstrap_means(
    values: np.ndarray,
    counts: np.ndarray | None,
    rng: np.random.Generator,
    picks: np.ndarray | None = None,
) -> np.ndarray:
    """(draws,) bootstrap draws of the mean over seeds of each seed's mean over cells.

    Args:
        values: (S, C) per seed and cell (a held-out set): its accuracy.
        counts: (S, C) the examples behind each value; a drawn seed's cell is redrawn as
            Binomial(count, value) / count. None: values are kept (only seeds resampled).
        rng: the seeded generator every draw comes from.
        picks: (draws, S) seed indices (:func:`seed_picks`); default: drawn here.
    """
    values = np.atleast_2d(np.asarray(values, dtype=float))
    if picks is None:
        picks = seed_picks(rng, values.shape[0])
    drawn = values[picks]  # (draws, S, C)
    if counts is not None:
        n = np.atleast_2d(np.asarray(counts, dtype=np.int64))[picks]
        ok = (n > 0) & np.isfinite(drawn)
        hits = rng.binomial(np.where(ok, n, 0), np.where(ok, np.clip(drawn, 0, 1), 0))
        drawn = np.where(ok, hits / np.maximum(n, 1), np.nan)
    return np.nanmean(np.nanmean(drawn, axis=2), axis=1)


def percentile_interval(draws: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap ``draws``."""
    tail = 50 * (1 - level)
    low, high = np.percentile(np.asarray(draws, dtype=float), [tail, 100 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class Interval:
    """A point estimate (the mean over seeds) with its 95 % bootstrap interval."""

    mean: float
    low: float
    high: float

    @classmethod
    def of(cls, mean: float, draws: np.ndarray) -> Interval:
        return cls(mean, *percentile_interval(draws))

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def format(self, digits: int = 3, sign: bool = False) -> str:
        """``mean [low, high]``; ``-`` where there is no value."""
        if not math.isfinite(self.mean):
            return "-"
        plus = "+" if sign else ""
        return (
            f"{self.mean:{plus}.{digits}f} [{self.low:{plus}.{digits}f}, "
            f"{self.high:{plus}.{digits}f}]"
        )


def lookup(config: dict[str, Any], key: str) -> Any:
    """``config`` at a dotted ``key`` (``model.arch.n_layers``), None where a level is
    missing."""
    value: Any = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


@dataclass(kw_only=True)
class SeedRun:
    """The end-of-fit results of one finished run."""

    seed: int
    path: Path
    """Where it was read: its version folder, or its record."""
    result: Any
    """The study's end-of-fit result (an ExtrapolationResult, a RecallResult)."""
    alpha_steps: np.ndarray | None = None
    """(S,) optimizer steps of the alpha trajectory (None: no alpha, e.g. dense)."""
    alphas: np.ndarray | None = None
    """(S, L) every layer's alpha at those steps."""


@dataclass
class VariantRuns:
    """One variant's finished runs in one task, one per seed."""

    variant: Variant
    runs: list

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def learns_alpha(self) -> bool:
        """Some layer's alpha moved during training in some run (a learned schedule)."""
        return any(
            r.alphas is not None and len(r.alphas) > 1 and np.ptp(r.alphas, axis=0).max() > 0
            for r in self.runs
        )

    def alpha_runs(self) -> list[SeedRun]:
        return [run for run in self.runs if run.alphas is not None and len(run.alphas)]

    def alpha_at(self, index: int) -> list[Spread]:
        """Per layer: alpha at trajectory point ``index`` (0: the start, -1: the end)."""
        at = (run.alphas[index] for run in self.alpha_runs())
        return [Spread.of(layer) for layer in zip(*at, strict=True)]

    def alpha_drift(self) -> list[Spread]:
        """Per layer: alpha at the end minus alpha at the start, over seeds."""
        drifts = (r.alphas[-1] - r.alphas[0] for r in self.alpha_runs())
        return [Spread.of(layer) for layer in zip(*drifts, strict=True)]


@dataclass(kw_only=True)
class RunGroup:
    """The variants of one task trained alike, each with a finished run, in the preset's
    order."""

    variants: list
    setup: dict[str, Any] = field(default_factory=dict)
    """The config values the runs share (the preset's ``setup_keys``)."""

    @property
    def first(self) -> Any:
        """The first run's result."""
        return self.variants[0].runs[0].result

    @property
    def training_length(self) -> int:
        return self.first.training_length

    @property
    def lengths(self) -> list[int]:
        return list(self.first.lengths)

    def variant(self, name: str) -> Any:
        return next((v for v in self.variants if v.name == name), None)

    def multiple(self, length: int) -> str:
        return f"{length / self.training_length:g}x"


def complete_dir(run: PresetRun) -> tuple[Path | None, str]:
    """(the complete version folder, "") of a run, or (None, its state)."""
    status = run_status(run)
    if status.state is not RunState.COMPLETE or status.run_dir is None:
        return None, status.state.value
    return status.run_dir, ""


Read = Callable[[PresetRun], tuple[Any, Any, Any]]
"""A run -> (its SeedRun, the setup values it compares, where it was read), or (None, why it
is missing, None)."""


def collect_alike(
    runs: Sequence[PresetRun], read: Read, compared: str, variant_type: type = VariantRuns
) -> tuple[list[tuple[Task, list, dict[str, Any]]], list[tuple[PresetRun, str]]]:
    """Read every run of ``runs`` (``read``): per task that has a finished run, (the task,
    its variants in the preset's order, its setup values); and the runs not read, with why.

    Raises ConfigError when there are no runs, or when two runs of one task were not trained
    alike (a setup value both recorded, the evaluation lengths or the result's ``compared``,
    e.g. its held-out ``sets``, differ). A value only one run recorded (its record was
    written before the preset compared that key) is not a difference.
    """
    if not runs:
        raise ConfigError("no runs to read")
    found: dict[str, dict[str, VariantRuns]] = {}
    firsts: dict[str, tuple[dict[str, Any], Path, tuple]] = {}
    missing: list[tuple[PresetRun, str]] = []
    for run in runs:
        seed_run, values, where = read(run)
        if seed_run is None:
            missing.append((run, values))
            continue
        result = seed_run.result
        evaluated = (tuple(result.lengths), tuple(getattr(result, compared)))
        setup, first, expected = firsts.setdefault(run.setup.name, (values, where, evaluated))
        differ = [
            f"{key} {setup[key]!r} vs {value!r}"
            for key, value in values.items()
            if key in setup and not same_setting(setup[key], value)
        ]
        if evaluated != expected:
            differ.append(f"evaluation lengths/{compared} {expected} vs {evaluated}")
        if differ:
            raise ConfigError(
                f"{where} was not trained like {first} ({'; '.join(differ)}): a study "
                "compares runs that differ only in attention and seed"
            )
        variants = found.setdefault(run.setup.name, {})
        variants.setdefault(run.variant.name, variant_type(run.variant, [])).runs.append(seed_run)
    preset = runs[0].preset
    groups = [
        (task, [found[task.name][v.name] for v in preset.variants if v.name in found[task.name]])
        for task in preset.all_tasks
        if task.name in found
    ]
    return [(task, variants, firsts[task.name][0]) for task, variants in groups], missing


def same_setting(a: Any, b: Any) -> bool:
    """Whether two recorded values are one setting: equal, or two paths of one class (records
    name an earlier version's paths: the recall tasks' DataModules in ``lit_sparse.data``)."""
    if a == b:
        return True
    cls = import_class(current_path(a))
    return isinstance(cls, type) and cls is import_class(current_path(b))


# ------------------------------------------------------------------------- the tables
def verdict(flag: bool | None) -> str:
    return "n/a (one seed)" if flag is None else ("yes" if flag else "no")


def compared(a: Spread, b: Spread | None, digits: int, sign: bool = False) -> list[str]:
    """A comparison's cells: a, b (None: against zero), a - b, sd_a + sd_b and whether the
    two differ beyond the seed spread."""
    spread = a.sd + (0.0 if b is None else b.sd)  # nan with one seed on a side
    return [
        a.format(digits, sign),
        "0" if b is None else b.format(digits, sign),
        f"{a.mean - (0.0 if b is None else b.mean):+.{digits}f}",
        "-" if math.isnan(spread) else f"{spread:.{digits}f}",
        verdict(beyond_spread(a, b)),
    ]


def comparison_table(title: str, text: str, labels: list[str], rows: list[list[str]]) -> str:
    """The comparisons' table: per row, the ``labels`` cells and :func:`compared`'s."""
    if not rows:
        return "## Comparisons\n\nNone of the compared variants were run."
    header = [*labels, "a", "b", "a - b", "sd_a + sd_b", "beyond spread"]
    return section(title, text, markdown_table(header, rows))


def section(title: str, text: str, table: str) -> str:
    """One table of a study's document: its title, what it shows, the table."""
    return "\n".join([f"## {title}", "", text, "", table])


def seed_counts(variants: Sequence[VariantRuns]) -> str:
    return ", ".join(f"{v.name} {len(v.runs)}" for v in variants)


def left_out(missing: Sequence[tuple[PresetRun, str]]) -> str:
    return "Not complete, left out: " + ", ".join(f"{r.name} ({s})" for r, s in missing) + "."


def alpha_table(
    groups: Sequence[tuple[list[str], VariantRuns]],
    labels: list[str],
    title: str,
    text: str,
    start: bool = False,
    moved: Callable[[Spread], bool | None] = beyond_spread,
) -> str:
    """Per variant that learns alpha (each of ``groups`` named by its ``labels`` cells) and
    layer: alpha at the start (``start``) and at the end, the drift and whether it moved
    (``moved(drift)``; default: beyond its seed spread)."""
    rows = []
    for cells, variant in groups:
        if not variant.learns_alpha:
            continue
        columns = [variant.alpha_at(0)] if start else []
        columns += [variant.alpha_at(-1), variant.alpha_drift()]
        rows += [
            [*cells, str(layer), *(v.format(4) for v in values), drift.format(4, sign=True)]
            + [verdict(moved(drift))]
            for layer, (*values, drift) in enumerate(zip(*columns, strict=True))
        ]
    if not rows:
        return "## Learned alpha\n\nNo run with a learned alpha schedule."
    header = [*labels, "layer", *(["start"] if start else []), "end", "drift", "moved"]
    return section(title, text, markdown_table(header, rows))
