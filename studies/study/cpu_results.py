"""The cpu preset's finished runs, grouped by variant, as spreads over seeds
(:mod:`lit_sparse_studies.study.seeds`).

Per run: perplexity per held-out set and evaluation length (``extrapolation.json``), the
position-binned NLL at the last validation (``position_loss.json``) and every layer's alpha
over steps (``lit_sparse.load_run``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lit_sparse import ConfigError
from lit_sparse_studies.study import cpu_records, seeds
from lit_sparse_studies.study.preset import Preset, PresetRun
from lit_sparse_studies.study.seeds import Spread

__all__ = ["PerplexityRun", "StudyResults", "VariantResults", "collect"]


@dataclass(kw_only=True)
class PerplexityRun(seeds.SeedRun):
    """A finished run: ``result`` is its ExtrapolationResult."""

    bins: dict[str, list[float | None]]
    """set -> mean NLL per position bin, at the last validation."""


class VariantResults(seeds.VariantRuns):
    """One variant's finished runs, one per seed."""

    def ppl(self, set_name: str, length: int) -> Spread:
        return Spread.of([run.result.ppl(set_name, length) for run in self.runs])

    def change(self, set_name: str, length: int) -> Spread:
        """Per-seed change against the training length, in percent."""
        return Spread.of([run.result.change_pct(set_name, length) for run in self.runs])

    def bins(self, set_name: str) -> list[Spread]:
        per_run = [run.bins.get(set_name) or [] for run in self.runs]
        n_bins = max((len(b) for b in per_run), default=0)
        return [Spread.of([b[k] if k < len(b) else None for b in per_run]) for k in range(n_bins)]

    def first_last(self, set_name: str) -> Spread:
        """First bin minus last bin per seed: how much lower the loss is late in the window."""
        ends = [(bins[0], bins[-1]) for run in self.runs if (bins := run.bins.get(set_name))]
        return Spread.of([first - last for first, last in ends if None not in (first, last)])


@dataclass(kw_only=True)
class StudyResults(seeds.RunGroup):
    """Every variant with at least one finished run, in the preset's order."""

    preset: Preset
    missing: list[tuple[PresetRun, str]]
    """Runs asked for that are not complete, and their state."""

    @property
    def sets(self) -> list[str]:
        return self.first.sets


def _read(run: PresetRun) -> tuple[Any, Any, Any]:
    """A complete run from its folder, read as its record would hold it."""
    run_dir, state = seeds.complete_dir(run)
    if run_dir is None:
        return None, state, None
    labels = {"variant": run.variant.name, "seed": run.seed}
    record = cpu_records.make_record(run_dir, labels, keys=run.preset.setup_keys)
    return _from_record(run, record, run_dir)


def _from_record(run: PresetRun, record: dict[str, Any], path: Path) -> tuple[Any, Any, Any]:
    """(the run, its setup values, the record's path) of a record naming ``run``."""
    from lit_sparse.evaluation import ExtrapolationResult

    cpu_records.check_labels(run, record, path)
    alpha = record.get("alpha")
    found = PerplexityRun(
        seed=run.seed,
        path=path,
        result=ExtrapolationResult.from_dict(record["extrapolation"]),
        bins=dict(record["position_loss"].get("sets") or {}),
        alpha_steps=None if alpha is None else np.asarray(alpha["steps"], dtype=np.int64),
        alphas=None if alpha is None else np.asarray(alpha["alphas"], dtype=np.float64),
    )
    return found, dict(record.get("setup") or {}), path


def collect(runs: Sequence[PresetRun], results: Path | None = None) -> StudyResults:
    """Read every complete run of ``runs`` (from its record under ``results``, when given:
    :mod:`lit_sparse_studies.study.cpu_records`; else from its run folder); the others are
    listed as missing.

    Raises ConfigError when no run is complete, or when two runs were not trained alike
    (a shared config value differs, or their evaluation lengths or held-out sets differ).
    """

    def read(run: PresetRun) -> tuple[Any, Any, Any]:
        if results is None:
            return _read(run)
        path = cpu_records.record_file(results, run.variant.name, run.seed)
        if not path.is_file():
            return None, "no record", None
        return _from_record(run, cpu_records.read_record(path), path)

    groups, missing = seeds.collect_alike(runs, read, "sets", VariantResults)
    if not groups:
        where = (
            f"no record under {results}"
            if results is not None
            else f"no complete run under {runs[0].root} (complete: extrapolation.json and "
            "position_loss.json at max_steps)"
        )
        raise ConfigError(f"{where}; run the preset first with --run")
    (_, variants, setup), *_ = groups
    return StudyResults(preset=runs[0].preset, variants=variants, missing=missing, setup=setup)
