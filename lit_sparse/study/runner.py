"""Running a preset's runs in order: complete runs are skipped, interrupted ones resumed through
the CLI's own ``fit --ckpt_path last``, the rest started; so a study can be run in pieces
(stop it at any moment and run the same command again)."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lit_sparse.study.preset import (
    PresetRun,
    RunState,
    RunStatus,
    check_record,
    run_status,
    write_record,
)

__all__ = ["Outcome", "run_preset"]

Launcher = Callable[[list[str]], int]
"""Runs ``python -m lit_sparse <args>`` (e.g. :func:`lit_sparse.cli.main`); returns its exit
status."""


@dataclass
class Outcome:
    """What happened to one run."""

    run: PresetRun
    action: str
    """``skipped`` (already complete), ``resumed`` or ``started``."""
    code: int
    """0: the run is complete now; else the fit's exit status (1 when the fit returned but
    left no end-of-fit results)."""
    seconds: float
    status: RunStatus


def run_preset(
    runs: Sequence[PresetRun],
    launch: Launcher,
    extra: Sequence[str] = (),
    echo: Callable[[str], None] = print,
) -> list[Outcome]:
    """Bring every run to complete, one after another.

    Every run's record is checked before anything is trained (a folder started with other
    options or edited configs is refused). A run that fails is reported and the next one
    starts; KeyboardInterrupt and SystemExit stop the whole study.
    """
    for run in runs:
        check_record(run, extra)
    outcomes = []
    for index, run in enumerate(runs, 1):
        head = f"[{index}/{len(runs)}] {run.name}"
        status = run_status(run)
        if status.state is RunState.COMPLETE:
            echo(f"{head}: complete ({status.run_dir}, {status.detail}), skipped")
            outcomes.append(Outcome(run, "skipped", 0, 0.0, status))
            continue
        resume = status.state is RunState.INTERRUPTED
        args = run.fit_args(extra, resume=resume)
        action = "resumed" if resume else "started"
        verb = "resuming" if resume else "starting"
        echo(f"{head}: {verb}: python -m lit_sparse {' '.join(args)}")
        write_record(run, extra)
        start = time.perf_counter()
        try:
            code = launch(args)
        except Exception:  # one broken run must not cost the rest of a long study
            traceback.print_exc()
            code = 1
        seconds = time.perf_counter() - start
        after = run_status(run)
        if code == 0 and after.state is not RunState.COMPLETE:
            code = 1
            echo(
                f"{head}: fit returned without the end-of-fit results "
                f"({' and '.join(run.preset.results)} at max_steps) in {run.experiment}"
            )
        verdict = "complete" if code == 0 else f"failed (exit status {code})"
        echo(f"{head}: {verdict} after {seconds:.0f} s")
        outcomes.append(Outcome(run, action, code, seconds, after))
    return outcomes
