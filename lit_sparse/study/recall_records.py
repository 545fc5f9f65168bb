"""A finished recall run as one small JSON file, committed beside the study's document.

A run folder (checkpoints, events) is large and machine-local; the record is what the
document is built from, so ``matrix --preset recall --table/--plot --results DIR`` rebuilds it
on any machine. ``DIR/<task>/<variant>/seed<K>.json`` holds the run's ``recall.json`` (every
accuracy by policy, length and set, with each pattern's keys per query, decoding cache and
coverage), its learning curve (every logged ``val/*`` scalar over steps), the alpha trajectory,
the final and maximum steps and whether it stopped early, its wall and CPU time, the config
values the study compares (the recall preset's ``setup_keys``), the options that started it
and the commit it ran on.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lit_sparse.errors import DamagedFileError, check_format
from lit_sparse.io.atomic import write_json
from lit_sparse.io.yaml_files import load_yaml
from lit_sparse.study.preset import RECALL
from lit_sparse.study.seeds import lookup

__all__ = [
    "FORMAT",
    "learning_curve",
    "make_record",
    "read_record",
    "record_file",
    "source_commit",
    "write_record",
]

FORMAT = "lit_sparse.recall-run/1"


def record_file(results: Path, task: str, variant: str, seed: int) -> Path:
    return Path(results) / task / variant / f"seed{seed}.json"


def learning_curve(run_dir: Path, prefix: str = "val/") -> dict[str, list]:
    """Every scalar tag under ``prefix`` in the run's TensorBoard events, as
    ``{"step": [...], tag: [...]}`` over the steps where validation ran (None where a tag
    was not logged at a step). Later events at a step win (a resume rewrites it)."""
    from lit_sparse.runs.events import read_scalars

    by_tag = read_scalars(run_dir, prefix)
    steps = sorted({step for values in by_tag.values() for step in values})
    curve: dict[str, list] = {"step": steps}
    for tag in sorted(by_tag):
        values = [by_tag[tag].get(step) for step in steps]
        curve[tag] = [None if v is None else round(v, 6) for v in values]
    return curve


def source_commit() -> str | None:
    """The commit of the lit_sparse checkout this process imports (``+dirty`` with local
    edits), None outside a git checkout."""
    folder = Path(__file__).resolve().parents[2]

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30
        )

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def make_record(
    run_dir: Path,
    labels: dict[str, Any],
    wall_s: float | None = None,
    cpu_s: float | None = None,
    commit: str | None = None,
    keys: Sequence[str] = RECALL.setup_keys,
) -> dict[str, Any]:
    """The record of a finished run folder; ``labels`` name it (task, variant, seed), its
    ``setup`` holds the config values at ``keys``."""
    from lit_sparse.runs.analysis import load_run, read_result_json

    run_dir = Path(run_dir)
    recall = read_result_json(run_dir / "recall.json")
    if recall is None:
        raise DamagedFileError(f"{run_dir}: no recall.json; the run has not finished")
    config = load_yaml(run_dir / "config.yaml", "run config")
    trajectory = load_run(run_dir, load_model=False).alpha_trajectory
    started = run_dir.parent / "preset.yaml"
    return {
        "format": FORMAT,
        **labels,
        "commit": commit,
        "setup": {key: lookup(config, key) for key in keys},
        "attention": lookup(config, "model.attention"),
        "options": load_yaml(started, "run record").get("options") if started.is_file() else None,
        "step": recall.get("step"),
        "max_steps": lookup(config, "trainer.max_steps"),
        "stopped_early": recall.get("stopped_early") is True,
        "wall_s": None if wall_s is None else round(wall_s, 1),
        "cpu_s": None if cpu_s is None else round(cpu_s, 1),
        "curve": learning_curve(run_dir),
        "alpha": None
        if trajectory is None
        else {
            "steps": [int(s) for s in trajectory.steps],
            "alphas": [[round(float(a), 6) for a in row] for row in trajectory.alphas],
        },
        "recall": recall,
    }


def write_record(path: Path, record: dict[str, Any]) -> Path:
    return write_json(path, record)


def read_record(path: Path) -> dict[str, Any]:
    """A record file; DamagedFileError naming it when it is not one."""
    from lit_sparse.runs.analysis import read_result_json

    record = read_result_json(path)
    check_format(record, FORMAT, f"a recall run record: {path}", DamagedFileError)
    return record
