"""A preset's finished runs, grouped by variant, and their statistics over seeds.

Per run: perplexity per held-out set and evaluation length (``extrapolation.json``), the
position-binned NLL at the last validation (``position_loss.json``) and every layer's alpha
over steps (``lit_sparse.load_run``). Per variant, each quantity is a :class:`Spread` over the
seeds: mean and sample standard deviation (n - 1 in the denominator).

The rule for "beyond the seed spread" (:func:`beyond_spread`): two means differ beyond the
spread when ``|mean_a - mean_b| > sd_a + sd_b``; a quantity differs from zero (a change
against 1x, an alpha drift) when ``|mean| > sd``. With fewer than two seeds on a side the
spread is unknown and nothing is marked.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.extrapolation import ExtrapolationResult
from lit_sparse.io.yaml_files import load_yaml
from lit_sparse.study.preset import Preset, PresetRun, RunState, Variant, run_status

__all__ = ["SeedRun", "Spread", "StudyResults", "VariantResults", "beyond_spread", "collect"]


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


@dataclass
class SeedRun:
    """The end-of-fit results of one finished run."""

    seed: int
    path: Path
    """Its version folder."""
    extrapolation: ExtrapolationResult
    bins: dict[str, list[float | None]]
    """set -> mean NLL per position bin, at the last validation."""
    alpha_steps: np.ndarray | None = None
    """(S,) optimizer steps of the alpha trajectory (None: no alpha, e.g. dense)."""
    alphas: np.ndarray | None = None
    """(S, L) every layer's alpha at those steps."""


@dataclass
class VariantResults:
    """One variant's finished runs, one per seed."""

    variant: Variant
    runs: list[SeedRun]

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def seeds(self) -> list[int]:
        return [run.seed for run in self.runs]

    def ppl(self, set_name: str, length: int) -> Spread:
        return Spread.of([run.extrapolation.ppl(set_name, length) for run in self.runs])

    def change(self, set_name: str, length: int) -> Spread:
        """Per-seed change against the training length, in percent."""
        return Spread.of([run.extrapolation.change_pct(set_name, length) for run in self.runs])

    def bins(self, set_name: str) -> list[Spread]:
        per_run = [run.bins.get(set_name) or [] for run in self.runs]
        n_bins = max((len(b) for b in per_run), default=0)
        return [Spread.of([b[k] if k < len(b) else None for b in per_run]) for k in range(n_bins)]

    def first_last(self, set_name: str) -> Spread:
        """First bin minus last bin per seed: how much lower the loss is late in the window."""
        values = []
        for run in self.runs:
            bins = run.bins.get(set_name) or []
            if bins and bins[0] is not None and bins[-1] is not None:
                values.append(bins[0] - bins[-1])
        return Spread.of(values)

    @property
    def learns_alpha(self) -> bool:
        """Some layer's alpha moved during training in some run (a learned schedule)."""
        return any(
            run.alphas is not None and len(run.alphas) > 1 and np.ptp(run.alphas, axis=0).max() > 0
            for run in self.runs
        )

    def _alpha_runs(self) -> list[SeedRun]:
        return [run for run in self.runs if run.alphas is not None and len(run.alphas)]

    def alpha_at(self, index: int) -> list[Spread]:
        """Per layer: alpha at trajectory point ``index`` (0: the start, -1: the end)."""
        runs = self._alpha_runs()
        n_layers = runs[0].alphas.shape[1] if runs else 0
        return [Spread.of([run.alphas[index, k] for run in runs]) for k in range(n_layers)]

    def alpha_drift(self) -> list[Spread]:
        """Per layer: alpha at the end minus alpha at step 0, over seeds."""
        runs = self._alpha_runs()
        n_layers = runs[0].alphas.shape[1] if runs else 0
        return [
            Spread.of([run.alphas[-1, k] - run.alphas[0, k] for run in runs])
            for k in range(n_layers)
        ]


SETUP_KEYS = (
    ("model", "arch", "n_layers"),
    ("model", "arch", "d_model"),
    ("model", "arch", "n_heads"),
    ("model", "arch", "n_kv_heads"),
    ("model", "arch", "head_dim"),
    ("model", "lr"),
    ("model", "warmup_steps"),
    ("data", "init_args", "seq_len"),
    ("data", "init_args", "batch_size"),
    ("data", "init_args", "val_windows"),
    ("trainer", "max_steps"),
    ("trainer", "accumulate_grad_batches"),
    ("trainer", "devices"),
)
"""Config values every run of a study must share (the attention and the seed aside)."""


def _lookup(config: dict[str, Any], keys: Sequence[str]) -> Any:
    value: Any = config
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


@dataclass
class StudyResults:
    """Every variant with at least one finished run, in the preset's order."""

    preset: Preset
    variants: list[VariantResults]
    missing: list[tuple[PresetRun, str]]
    """Runs asked for that are not complete, and their state."""
    setup: dict[str, Any] = field(default_factory=dict)
    """The shared config values (``SETUP_KEYS``, dotted)."""

    @property
    def first(self) -> SeedRun:
        return self.variants[0].runs[0]

    @property
    def training_length(self) -> int:
        return self.first.extrapolation.training_length

    @property
    def lengths(self) -> list[int]:
        return list(self.first.extrapolation.lengths)

    @property
    def sets(self) -> list[str]:
        return self.first.extrapolation.sets

    def variant(self, name: str) -> VariantResults | None:
        return next((v for v in self.variants if v.name == name), None)

    def multiple(self, length: int) -> str:
        return f"{length / self.training_length:g}x"


def _read(run: PresetRun, run_dir: Path) -> tuple[SeedRun, dict[str, Any]]:
    from lit_sparse.runs.analysis import load_run

    loaded = load_run(run_dir, load_model=False)
    if loaded.extrapolation is None or loaded.position_loss is None:
        raise ConfigError(f"{run_dir}: no extrapolation.json or position_loss.json")
    trajectory = loaded.alpha_trajectory
    seed_run = SeedRun(
        seed=run.seed,
        path=run_dir,
        extrapolation=loaded.extrapolation,
        bins=dict(loaded.position_loss.get("sets") or {}),
        alpha_steps=None if trajectory is None else trajectory.steps,
        alphas=None if trajectory is None else trajectory.alphas,
    )
    return seed_run, load_yaml(run_dir / "config.yaml", "run config")


def collect(runs: Sequence[PresetRun]) -> StudyResults:
    """Read every complete run of ``runs``; the others are listed as missing.

    Raises ConfigError when no run is complete, or when two runs were not trained alike
    (a shared config value differs, or their evaluation lengths or held-out sets differ).
    """
    if not runs:
        raise ConfigError("no runs to read")
    by_variant: dict[str, VariantResults] = {}
    missing: list[tuple[PresetRun, str]] = []
    setup: dict[str, Any] | None = None
    reference: tuple[PresetRun, Path, tuple] | None = None
    for run in runs:
        status = run_status(run)
        if status.state is not RunState.COMPLETE or status.run_dir is None:
            missing.append((run, status.state.value))
            continue
        seed_run, config = _read(run, status.run_dir)
        values = {".".join(keys): _lookup(config, keys) for keys in SETUP_KEYS}
        shape = (
            tuple(values.items()),
            tuple(seed_run.extrapolation.lengths),
            tuple(seed_run.extrapolation.sets),
        )
        if reference is None:
            reference, setup = (run, status.run_dir, shape), values
        elif shape != reference[2]:
            differ = [
                f"{key} {a!r} vs {b!r}"
                for (key, a), (_, b) in zip(reference[2][0], shape[0], strict=True)
                if a != b
            ] or [f"evaluation lengths/sets {reference[2][1:]} vs {shape[1:]}"]
            raise ConfigError(
                f"{status.run_dir} was not trained like {reference[1]} ({'; '.join(differ)}): "
                "a study compares runs that differ only in attention and seed"
            )
        by_variant.setdefault(run.variant.name, VariantResults(run.variant, [])).runs.append(
            seed_run
        )
    if not by_variant:
        where = runs[0].root
        raise ConfigError(
            f"no complete run under {where} (complete: extrapolation.json and "
            "position_loss.json at max_steps); run the preset first with --run"
        )
    preset = runs[0].preset
    ordered = [by_variant[v.name] for v in preset.variants if v.name in by_variant]
    return StudyResults(preset, ordered, missing, setup or {})
