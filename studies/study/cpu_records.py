"""A finished cpu-study run as one small JSON file, committed beside docs/cpu-study.md.

A run folder (checkpoints, events) is large and machine-local; the record is what the page is
built from, so ``matrix --preset cpu --table/--plot --results DIR`` rebuilds its tables and
figures on any machine. ``DIR/<variant>/seed<K>.json`` holds the run's ``extrapolation.json``
(perplexity per held-out set and length), its ``position_loss.json`` (the NLL per position bin
at the last validation), the alpha trajectory, its held-out learning curve, its wall and CPU
time, the config values the study compares (the cpu preset's ``setup_keys``), the options that
started it and the commit it ran on.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lit_sparse import DamagedFileError, check_format
from lit_sparse_studies.study.preset import CPU, PresetRun
from lit_sparse_studies.study.recall_records import run_fields

__all__ = ["FORMAT", "check_labels", "make_record", "read_record", "record_file"]

FORMAT = "lit_sparse.cpu-run/1"


def record_file(results: Path, variant: str, seed: int) -> Path:
    return Path(results) / variant / f"seed{seed}.json"


def make_record(
    run_dir: Path,
    labels: dict[str, Any],
    wall_s: float | None = None,
    cpu_s: float | None = None,
    commit: str | None = None,
    keys: Sequence[str] = CPU.setup_keys,
) -> dict[str, Any]:
    """The record of a finished run folder; ``labels`` name it (variant, seed)."""
    from lit_sparse.runs import read_result_json

    run_dir = Path(run_dir)
    extrapolation = read_result_json(run_dir / "extrapolation.json")
    position_loss = read_result_json(run_dir / "position_loss.json")
    if extrapolation is None or position_loss is None:
        raise DamagedFileError(
            f"{run_dir}: no extrapolation.json or position_loss.json; the run has not finished"
        )
    return {
        "format": FORMAT,
        **labels,
        "step": extrapolation.get("step"),
        **run_fields(run_dir, keys, wall_s, cpu_s, commit),
        "extrapolation": extrapolation,
        "position_loss": position_loss,
    }


def read_record(path: Path) -> dict[str, Any]:
    """A record file; DamagedFileError naming it when it is not one."""
    from lit_sparse.runs import read_result_json

    record = read_result_json(path)
    check_format(record, FORMAT, f"a cpu-study run record: {path}", DamagedFileError)
    for field in ("extrapolation", "position_loss"):
        if not isinstance(record.get(field), dict):
            raise DamagedFileError(
                f"{path}: its {field} is {record.get(field)!r}; expected a mapping"
            )
    return record


def check_labels(run: PresetRun, record: dict[str, Any], path: Path) -> None:
    """DamagedFileError unless the record names ``run`` (a copy under another run's name)."""
    wrong = [
        f"{key} {record.get(key)!r} (expected {want!r})"
        for key, want in (("variant", run.variant.name), ("seed", run.seed))
        if record.get(key) != want
    ]
    if wrong:
        raise DamagedFileError(f"{path}: the record is not this path's run: {', '.join(wrong)}")
