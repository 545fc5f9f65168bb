"""What ``matrix --preset`` reports: the preset's runs and their status, the fits ``--run``
would start, what it did, and the tables and figures of whichever study the preset is (the
cpu study's perplexity: :mod:`~lit_sparse_studies.study.cpu_report`; the recall study's:
:mod:`~lit_sparse_studies.study.recall_report`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lit_sparse.io import markdown_table
from lit_sparse_studies.study.preset import (
    PresetRun,
    RunState,
    extra_options,
    recorded_options,
    run_status,
)

if TYPE_CHECKING:
    from lit_sparse_studies.study.runner import Outcome

__all__ = ["dry_run", "listing", "outcome_table", "plots", "run_command", "tables"]


def run_command(
    runs: Sequence[PresetRun], variants=None, tasks=None, root=None, extra: Sequence[str] = ()
) -> str:
    """The command that runs ``runs``: the preset, seeds, the ``variants`` and ``tasks``
    asked for, and ``root``; ``extra`` fit options after ``--run``."""
    words = ["--preset", runs[0].preset.name, "--seeds"]
    words += [str(seed) for seed in dict.fromkeys(run.seed for run in runs)]
    for name, values in (("variants", variants), ("tasks", tasks)):
        words += [f"--{name}", *values] if values else []
    words += [] if root is None else ["--root", str(root)]
    return f"python -m lit_sparse matrix {shlex.join(words)} --run" + "".join(
        f" {shlex.quote(str(option))}" for option in extra
    )


def _trained_otherwise(run: PresetRun, status) -> list[str] | None:
    """The extra options a started run was trained with ([]: the preset's own; None: other
    options altogether) where ``--run`` without them refuses it; [] for any other run."""
    if status.state is RunState.NEW or (options := recorded_options(run)) is None:
        return []
    return extra_options(run, options)


def listing(runs: Sequence[PresetRun], variants=None, tasks=None, root=None) -> str:
    """Every run, its configs and options, its status and folder; then the counts and the
    command that runs them (:func:`run_command`)."""
    rows, states, otherwise = [], [], []
    for run in runs:
        status = run_status(run)
        states.append(status.state.value)
        if (extra := _trained_otherwise(run, status)) != []:
            otherwise.append(extra)
        configs = " ".join(str(path) for path in run.configs(Path("configs")))
        options = run.variant.task_options(run.setup) + run.variant.seed_overrides(run.seed)
        complete = status.state is RunState.COMPLETE
        state = status.state.value + (f" ({status.detail})" if complete else "")
        where = str(status.run_dir or run.experiment)
        rows.append([run.name, configs, " ".join(options), state, where])
    counts = ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))
    text = markdown_table(["run", "configs", "options", "status", "folder"], rows)
    text += f"\n\n{len(runs)} runs: {counts}. "
    if not otherwise:
        return text + (
            "Run them (skips complete runs, resumes interrupted ones): "
            + run_command(runs, variants, tasks, root)
        )
    # a smoke test's runs: --run without their options refuses them
    text += (
        f"{len(otherwise)} of them were trained with other options than the preset's (a smoke "
        "test?), and --run with the preset's own options refuses them: give another --root "
        "(or delete their folders) to run the preset's own setup"
    )
    same = otherwise[0]
    if same is not None and all(extra == same for extra in otherwise):
        text += "; to go on with the setup they were trained with: " + run_command(
            runs, variants, tasks, root, same
        )
    return text


def dry_run(runs: Sequence[PresetRun], extra: Sequence[str] = ()) -> list[str]:
    """What ``--run`` would do, a line per run: skip it, or the fit it would start."""
    lines = []
    for run in runs:
        status = run_status(run)
        if status.state is RunState.COMPLETE:
            lines.append(f"# {run.name}: complete ({status.run_dir}), skipped")
        else:
            resume = status.state is RunState.INTERRUPTED
            lines.append("python -m lit_sparse " + " ".join(run.fit_args(extra, resume=resume)))
    return lines


def outcome_table(outcomes: Sequence[Outcome]) -> str:
    """What ``--run`` did, a row per run."""
    rows = [[o.run.name, o.action, o.result, f"{o.seconds:.0f}"] for o in outcomes]
    return markdown_table(["run", "action", "result", "seconds"], rows)


Note = Callable[[str], None]
"""Told what a reader of the tables must know that they do not show (the recall runs' extra
fit options)."""


def _recall(runs: Sequence[PresetRun], results: Path | None, note: Note | None):
    from lit_sparse_studies.study.recall_results import collect_recall

    study = collect_recall(runs, results)
    for line in study.notes if note is not None else ():
        note(line)
    return study


def tables(runs: Sequence[PresetRun], results: Path | None = None, note: Note | None = None) -> str:
    """Every table of the study over seeds (``results``: the study's records, else the runs)."""
    if runs[0].preset.measures == "recall":
        from lit_sparse_studies.study.recall_report import recall_tables

        return recall_tables(_recall(runs, results, note))
    from lit_sparse_studies.study.cpu_report import study_tables
    from lit_sparse_studies.study.cpu_results import collect

    return study_tables(collect(runs, results))


def plots(
    runs: Sequence[PresetRun],
    folder: str | Path | None = None,
    results: Path | None = None,
    note: Note | None = None,
) -> list[Path]:
    """Write the study's figures into ``folder`` (default ``<root>/plots``); the files."""
    folder = Path(folder) if folder else runs[0].root / "plots"
    if runs[0].preset.measures == "recall":
        from lit_sparse_studies.study.recall_plots import write_recall_plots

        return write_recall_plots(_recall(runs, results, note), folder)
    from lit_sparse_studies.study.cpu_plots import write_plots
    from lit_sparse_studies.study.cpu_results import collect

    return write_plots(collect(runs, results), folder)
