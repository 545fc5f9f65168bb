"""The recall preset's finished runs, grouped by task and variant, as spreads over seeds.

Per run: its ``recall.json`` (:class:`lit_sparse.evaluation.recall.RecallResult`: accuracy
per held-out set, evaluation length and ``new_offsets`` policy, with each pattern's keys per
query, decoding cache and coverage) and, for a learned schedule, every layer's alpha over
steps. Per (task, variant), each quantity is a :class:`lit_sparse.study.seeds.Spread` over
the seeds (mean and sample standard deviation), compared with the rule of
:func:`lit_sparse.study.seeds.beyond_spread`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.recall import RecallResult
from lit_sparse.study.preset import Preset, PresetRun, RunState, Task, Variant, run_status
from lit_sparse.study.recall_records import make_record, read_record, record_file
from lit_sparse.study.seeds import Spread

__all__ = ["RecallRun", "RecallStudy", "TaskResults", "VariantRecall", "collect_recall"]


@dataclass
class RecallRun:
    """The end-of-fit results of one finished run."""

    seed: int
    path: Path
    result: RecallResult
    alpha_steps: np.ndarray | None = None
    alphas: np.ndarray | None = None
    """(S, L) every layer's alpha over the trajectory's steps (None: no alpha)."""
    curve: dict[str, list] = field(default_factory=dict)
    """The learning curve: ``step`` and every ``val/*`` tag over it."""
    stopped_early: bool = False
    wall_s: float | None = None
    cpu_s: float | None = None


@dataclass
class VariantRecall:
    """One variant's finished runs in one task, one per seed."""

    variant: Variant
    runs: list[RecallRun]

    @property
    def name(self) -> str:
        return self.variant.name

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
        """(keys per query, mean over layers; decoding-cache rows, largest layer) at length."""
        offer = self.runs[0].result.offer.get(policy, {}).get(length)
        if not offer:
            return None
        keys, rows = offer["keys_per_query"], offer["cache_rows"]
        return sum(keys) / len(keys), max(rows)

    @property
    def learns_alpha(self) -> bool:
        return any(
            r.alphas is not None and len(r.alphas) > 1 and np.ptp(r.alphas, axis=0).max() > 0
            for r in self.runs
        )

    def alpha_drift(self) -> list[Spread]:
        """Per layer: alpha at the end minus alpha at the start, over seeds."""
        runs = [r for r in self.runs if r.alphas is not None and len(r.alphas)]
        layers = runs[0].alphas.shape[1] if runs else 0
        return [Spread.of([r.alphas[-1, k] - r.alphas[0, k] for r in runs]) for k in range(layers)]

    def alpha_end(self) -> list[Spread]:
        runs = [r for r in self.runs if r.alphas is not None and len(r.alphas)]
        layers = runs[0].alphas.shape[1] if runs else 0
        return [Spread.of([r.alphas[-1, k] for r in runs]) for k in range(layers)]


@dataclass
class TaskResults:
    """Every variant with a finished run in one task, in the preset's order."""

    task: Task
    variants: list[VariantRecall]
    setup: dict[str, Any] = field(default_factory=dict)

    @property
    def first(self) -> RecallResult:
        return self.variants[0].runs[0].result

    @property
    def training_length(self) -> int:
        return self.first.training_length

    @property
    def lengths(self) -> list[int]:
        return self.first.lengths

    @property
    def policies(self) -> list[str]:
        return self.first.policies

    def sets(self, length: int | None = None) -> list[str]:
        """The held-out sets (at ``length``: those scored there), in order."""
        if length is None:
            return self.first.sets
        return [s for s in self.first.sets if self.first.cell(self.policies[0], length, s)]

    def variant(self, name: str) -> VariantRecall | None:
        return next((v for v in self.variants if v.name == name), None)

    def multiple(self, length: int) -> str:
        return f"{length / self.training_length:g}x"


@dataclass
class RecallStudy:
    """The recall preset's results, task by task."""

    preset: Preset
    tasks: list[TaskResults]
    missing: list[tuple[PresetRun, str]]

    def task(self, name: str) -> TaskResults | None:
        return next((t for t in self.tasks if t.task.name == name), None)


def _read(run: PresetRun, run_dir: Path) -> tuple[RecallRun, dict[str, Any]]:
    """A run folder's results and the config values the study compares."""
    return _from_record(run, make_record(run_dir, {}), run_dir)


def _from_record(
    run: PresetRun, record: dict[str, Any], path: Path
) -> tuple[RecallRun, dict[str, Any]]:
    try:
        result = RecallResult.from_dict(record["recall"])
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{path}: not a recall table ({err})") from None
    alpha = record.get("alpha")
    recall_run = RecallRun(
        run.seed,
        path,
        result,
        None if alpha is None else np.asarray(alpha["steps"]),
        None if alpha is None else np.asarray(alpha["alphas"], dtype=float),
        curve=record.get("curve") or {},
        stopped_early=bool(record.get("stopped_early")),
        wall_s=record.get("wall_s"),
        cpu_s=record.get("cpu_s"),
    )
    return recall_run, record["setup"]


def _finished(run: PresetRun, results: Path | None):
    """(RecallRun, setup, where) of a finished run, or (None, why it is missing, None): read
    from its record under ``results``, or from its run folder."""
    if results is not None:
        path = record_file(results, run.setup.name, run.variant.name, run.seed)
        if not path.is_file():
            return None, "no record", None
        return (*_from_record(run, read_record(path), path), path)
    status = run_status(run)
    if status.state is not RunState.COMPLETE or status.run_dir is None:
        return None, status.state.value, None
    return (*_read(run, status.run_dir), status.run_dir)


def collect_recall(runs: Sequence[PresetRun], results: Path | None = None) -> RecallStudy:
    """Read every complete run of ``runs`` (from its record under ``results``, when given:
    :mod:`lit_sparse.study.recall_records`; else from its run folder); the others are listed
    as missing.

    Raises ConfigError when no run is complete, or when two runs of one task were not
    trained alike (a shared config value, the evaluation lengths or the policies differ).
    """
    if not runs:
        raise ConfigError("no runs to read")
    preset = runs[0].preset
    by_task: dict[str, dict[str, VariantRecall]] = {}
    setups: dict[str, tuple[dict[str, Any], Path, tuple]] = {}
    missing: list[tuple[PresetRun, str]] = []
    for run in runs:
        recall_run, values, where = _finished(run, results)
        if recall_run is None:
            missing.append((run, values))
            continue
        shape = (
            tuple(values.items()),
            tuple(recall_run.result.lengths),
            tuple(recall_run.result.policies),
        )
        task = run.setup.name
        if task not in setups:
            setups[task] = (values, where, shape)
        elif shape != setups[task][2]:
            reference = setups[task]
            differ = [
                f"{key} {a!r} vs {b!r}"
                for (key, a), (_, b) in zip(reference[2][0], shape[0], strict=True)
                if a != b
            ] or [f"evaluation lengths/policies {reference[2][1:]} vs {shape[1:]}"]
            raise ConfigError(
                f"{where} was not trained like {reference[1]} ({'; '.join(differ)}): "
                "a study compares runs that differ only in attention and seed"
            )
        variants = by_task.setdefault(task, {})
        variants.setdefault(run.variant.name, VariantRecall(run.variant, [])).runs.append(
            recall_run
        )
    if not by_task:
        where = (
            f"no record under {results}"
            if results is not None
            else f"no complete run under {runs[0].root} (complete: recall.json at max_steps "
            "or at an early stop)"
        )
        raise ConfigError(f"{where}; run the preset first with --run")
    tasks = []
    for task in preset.all_tasks:
        if task.name in by_task:
            found = by_task[task.name]
            ordered = [found[v.name] for v in preset.variants if v.name in found]
            tasks.append(TaskResults(task, ordered, setups[task.name][0]))
    return RecallStudy(preset, tasks, missing)
