"""The recall preset's finished runs, grouped by task and variant, as spreads over seeds
(:mod:`lit_sparse_studies.study.seeds`).

Per run: its ``recall.json`` (:class:`lit_sparse.evaluation.recall.RecallResult`: accuracy
per held-out set, evaluation length and ``new_offsets`` policy, with each pattern's keys per
query, decoding cache and coverage), its learning curve and, for a learned schedule, every
layer's alpha over steps: read from its run folder or from its record
(:mod:`lit_sparse_studies.study.recall_records`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lit_sparse import ConfigError
from lit_sparse.evaluation import RecallResult
from lit_sparse_studies.study import seeds
from lit_sparse_studies.study.preset import Preset, PresetRun, Task, extra_options, recorded_options
from lit_sparse_studies.study.recall_records import (
    RecordChecks,
    make_record,
    read_record,
    record_file,
)
from lit_sparse_studies.study.seeds import Spread

__all__ = ["RecallRun", "RecallStudy", "TaskResults", "VariantRecall", "collect_recall"]


@dataclass(kw_only=True)
class RecallRun(seeds.SeedRun):
    """A finished run: ``result`` is its RecallResult."""

    curve: dict[str, list] = field(default_factory=dict)
    """The learning curve: ``step`` and every ``val/*`` tag over it."""
    stopped_early: bool = False
    wall_s: float | None = None
    cpu_s: float | None = None
    attention: dict[str, Any] | None = None
    """The run's ``model.attention`` config, as recorded ({class_path, init_args})."""


class VariantRecall(seeds.VariantRuns):
    """One variant's finished runs in one task, one per seed."""

    def spread(self, policy: str, length: int, set_name: str, key: str = "accuracy") -> Spread:
        """``accuracy`` (or ``exact``) of a held-out set over seeds."""
        return Spread.of([r.result.accuracy(policy, length, set_name, key) for r in self.runs])

    def mean_over(
        self, policy: str, length: int, names: Sequence[str], key: str = "accuracy"
    ) -> Spread:
        """Per seed, the mean over several sets (e.g. every passkey depth), then the spread."""
        values = []
        for run in self.runs:
            cells = [run.result.accuracy(policy, length, n, key) for n in names]
            cells = [c for c in cells if math.isfinite(c)]
            values.append(sum(cells) / len(cells) if cells else None)
        return Spread.of(values)

    def coverage(self, policy: str, length: int, set_name: str) -> float | None:
        """The bucket's coverage (the first seed's: the same for every seed but a learned
        alpha's)."""
        values = [r.result.accuracy(policy, length, set_name, "coverage") for r in self.runs]
        finite = [v for v in values if math.isfinite(v)]
        return sum(finite) / len(finite) if finite else None

    def offer(self, length: int, policy: str = "use") -> tuple[float, int] | None:
        """(keys per query: mean over layers, then over seeds; decoding-cache rows: the
        largest layer's, the largest over seeds) at ``length``. A learned alpha's cache
        differs from seed to seed, so one seed's would not be the variant's."""
        offers = [r.result.offer.get(policy, {}).get(length) for r in self.runs]
        offers = [o for o in offers if o]
        if not offers:
            return None
        keys = [sum(o["keys_per_query"]) / len(o["keys_per_query"]) for o in offers]
        return sum(keys) / len(keys), max(max(o["cache_rows"]) for o in offers)


@dataclass(kw_only=True)
class TaskResults(seeds.RunGroup):
    """Every variant with a finished run in one task, in the preset's order."""

    task: Task

    @property
    def policies(self) -> list[str]:
        return self.first.policies

    def sets(self, length: int | None = None) -> list[str]:
        """The held-out sets (at ``length``: those scored there), in order."""
        if length is None:
            return self.first.sets
        return [s for s in self.first.sets if self.first.cell(self.policies[0], length, s)]


@dataclass
class RecallStudy:
    """The recall preset's results, task by task."""

    preset: Preset
    tasks: list[TaskResults]
    missing: list[tuple[PresetRun, str]]
    notes: list[str] = field(default_factory=list)
    """What a reader must know that the tables do not show (a task's runs trained with extra
    fit options: not the preset's own setup)."""

    def task(self, name: str) -> TaskResults | None:
        return next((t for t in self.tasks if t.task.name == name), None)


def _from_record(run: PresetRun, record: dict[str, Any], path: Path) -> tuple[Any, Any, Any]:
    try:
        result = RecallResult.from_dict(record["recall"])
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{path}: not a recall table ({err})") from None
    alpha = record.get("alpha")
    recall_run = RecallRun(
        seed=run.seed,
        path=path,
        result=result,
        alpha_steps=None if alpha is None else np.asarray(alpha["steps"]),
        alphas=None if alpha is None else np.asarray(alpha["alphas"], dtype=float),
        curve=record.get("curve") or {},
        stopped_early=record.get("stopped_early") is True,
        wall_s=record.get("wall_s"),
        cpu_s=record.get("cpu_s"),
        attention=record.get("attention"),
    )
    return recall_run, record["setup"], path


def collect_recall(runs: Sequence[PresetRun], results: Path | None = None) -> RecallStudy:
    """Read every complete run of ``runs`` (from its record under ``results``, when given:
    :mod:`lit_sparse_studies.study.recall_records`; else from its run folder); the others are listed
    as missing.

    Raises ConfigError when no run is complete, or when two runs of one task were not
    trained alike (a shared config value, the evaluation lengths or the policies differ);
    DamagedFileError for a record that is not its path's run, a duplicate, one trained with
    other extra options than its task's others, or one holding an accuracy that is no share
    (:class:`~lit_sparse_studies.study.recall_records.RecordChecks`).
    """
    checks = RecordChecks()

    def read(run: PresetRun) -> tuple[Any, Any, Any]:
        if results is not None:
            path = record_file(results, run.setup.name, run.variant.name, run.seed)
            if not path.is_file():
                return None, "no record", None
            record = read_record(path)
            checks.add(record, path, run)
            return _from_record(run, record, path)
        run_dir, state = seeds.complete_dir(run)
        if run_dir is None:
            return None, state, None
        options = recorded_options(run)
        extra = None if options is None else extra_options(run, options)
        if extra is not None:
            checks.trained_alike(run, extra, run_dir)
        return _from_record(run, make_record(run_dir, {}, keys=run.preset.setup_keys), run_dir)

    groups, missing = seeds.collect_alike(runs, read, "policies", VariantRecall)
    if not groups:
        where = (
            f"no record under {results}"
            if results is not None
            else f"no complete run under {runs[0].root} (complete: recall.json at max_steps "
            "or at an early stop)"
        )
        raise ConfigError(f"{where}; run the preset first with --run")
    tasks = [TaskResults(task=t, variants=v, setup=setup) for t, v, setup in groups]
    return RecallStudy(runs[0].preset, tasks, missing, notes=checks.notes)
