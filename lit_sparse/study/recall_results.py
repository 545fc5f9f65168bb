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
from lit_sparse.io.yaml_files import load_yaml
from lit_sparse.study.preset import Preset, PresetRun, RunState, Task, Variant, run_status
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


SETUP_KEYS = (
    ("model", "arch", "n_layers"),
    ("model", "arch", "d_model"),
    ("model", "arch", "n_heads"),
    ("model", "arch", "n_kv_heads"),
    ("model", "lr"),
    ("model", "warmup_steps"),
    ("model", "min_lr_ratio"),
    ("data", "class_path"),
    ("data", "init_args", "seq_len"),
    ("data", "init_args", "batch_size"),
    ("data", "init_args", "vocab_size"),
    ("data", "init_args", "num_kv_pairs"),
    ("data", "init_args", "val_examples"),
    ("trainer", "max_steps"),
)
"""Config values every run of one task must share (the attention and the seed aside)."""


def _lookup(config: dict[str, Any], keys: Sequence[str]) -> Any:
    value: Any = config
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _read(run: PresetRun, run_dir: Path) -> tuple[RecallRun, dict[str, Any]]:
    from lit_sparse.runs.analysis import load_run, read_result_json

    saved = read_result_json(run_dir / "recall.json")
    try:
        result = RecallResult.from_dict(saved or {})
    except (KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"{run_dir / 'recall.json'}: not a recall table ({err})") from None
    loaded = load_run(run_dir, load_model=False)
    trajectory = loaded.alpha_trajectory
    recall_run = RecallRun(
        run.seed,
        run_dir,
        result,
        None if trajectory is None else trajectory.steps,
        None if trajectory is None else trajectory.alphas,
    )
    return recall_run, load_yaml(run_dir / "config.yaml", "run config")


def collect_recall(runs: Sequence[PresetRun]) -> RecallStudy:
    """Read every complete run of ``runs``; the others are listed as missing.

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
        status = run_status(run)
        if status.state is not RunState.COMPLETE or status.run_dir is None:
            missing.append((run, status.state.value))
            continue
        recall_run, config = _read(run, status.run_dir)
        values = {".".join(keys): _lookup(config, keys) for keys in SETUP_KEYS}
        shape = (
            tuple(values.items()),
            tuple(recall_run.result.lengths),
            tuple(recall_run.result.policies),
        )
        task = run.setup.name
        if task not in setups:
            setups[task] = (values, status.run_dir, shape)
        elif shape != setups[task][2]:
            reference = setups[task]
            differ = [
                f"{key} {a!r} vs {b!r}"
                for (key, a), (_, b) in zip(reference[2][0], shape[0], strict=True)
                if a != b
            ] or [f"evaluation lengths/policies {reference[2][1:]} vs {shape[1:]}"]
            raise ConfigError(
                f"{status.run_dir} was not trained like {reference[1]} ({'; '.join(differ)}): "
                "a study compares runs that differ only in attention and seed"
            )
        variants = by_task.setdefault(task, {})
        variants.setdefault(run.variant.name, VariantRecall(run.variant, [])).runs.append(
            recall_run
        )
    if not by_task:
        raise ConfigError(
            f"no complete run under {runs[0].root} (complete: recall.json at max_steps); run "
            "the preset first with --run"
        )
    tasks = []
    for task in preset.all_tasks:
        if task.name in by_task:
            found = by_task[task.name]
            ordered = [found[v.name] for v in preset.variants if v.name in found]
            tasks.append(TaskResults(task, ordered, setups[task.name][0]))
    return RecallStudy(preset, tasks, missing)
