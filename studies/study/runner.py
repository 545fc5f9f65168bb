"""Running a preset's runs in order: complete runs are skipped, interrupted ones resumed through
the CLI's own ``fit --ckpt_path last``, the rest started; so a study can be run in pieces
(stop it at any moment and run the same command again).

Each fit is its own process (:func:`fit_in_subprocess`): a segfault or an out-of-memory kill
ends that run, not the study, and every run imports the package as it is on disk then. Each
run is claimed before it is trained: an exclusive lock on its experiment folder
(``<root>/<variant>/seed<K>/.lock``), held while it trains and released by the kernel when
the process ends, so two ``matrix --run`` on one root never train one run twice: the second
skips a run another live process holds (saying which), and goes on with the next; a claim
of a process that died is free. A run folder that a start killed before its first
checkpoint left is cleared and its number reused, not left as an orphan ``version_0``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lit_sparse import RunInUseError
from lit_sparse.runs import RUN_HANDOFF, RunLock, lock_holder, remove_failed_start
from lit_sparse_studies.study.preset import (
    PresetRun,
    RunState,
    RunStatus,
    check_record,
    run_status,
    write_record,
)

__all__ = ["Outcome", "describe_exit", "fit_in_subprocess", "run_preset"]

Launcher = Callable[[list[str]], int]
"""Runs ``python -m lit_sparse <args>`` (:func:`fit_in_subprocess`); returns its exit
status (negative: killed by that signal)."""

STOP_SECONDS = 120.0
"""How long a fit stopped by Ctrl-C may take to stop gracefully before it is killed."""


def fit_in_subprocess(args: Sequence[str]) -> int:
    """``python -m lit_sparse <args>`` as a child process (its output goes where ours does);
    its exit status (:func:`run_child`)."""
    env = {key: value for key, value in os.environ.items() if key != RUN_HANDOFF}
    return run_child([sys.executable, "-m", "lit_sparse", *args], env)


def run_child(argv: Sequence[str], env: dict[str, str] | None = None) -> int:
    """``argv`` as a child process; its exit status. The child never outlives the study:
    on Ctrl-C or SIGTERM (a ``kill``, a scheduler's stop) it is stopped too (SIGINT, as the
    terminal sends it, then SIGKILL if it has not stopped within :data:`STOP_SECONDS` or on
    a second signal) and KeyboardInterrupt goes on; on Linux, a parent killed outright
    (SIGKILL) sends it SIGINT as it dies. A fit left running after its study would train on
    without the study's claim, and the study run again would meet it mid-run."""
    process = subprocess.Popen(argv, env=env, preexec_fn=_interrupt_when_parent_dies())
    with _sigterm_as_interrupt():
        try:
            return process.wait()
        except KeyboardInterrupt:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=STOP_SECONDS)
            except (KeyboardInterrupt, subprocess.TimeoutExpired):
                process.kill()
                process.wait()
            raise


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt meanwhile (main thread only: signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt_when_parent_dies():
    """A ``preexec_fn`` asking Linux to send the child SIGINT when its parent dies (prctl's
    PR_SET_PDEATHSIG); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    parent, libc = os.getpid(), ctypes.CDLL(None, use_errno=True)  # loaded before the fork

    def arm() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGINT)
        if os.getppid() != parent:  # the parent died before the request was made
            os.kill(os.getpid(), signal.SIGINT)

    return arm


PR_SET_PDEATHSIG = 1
"""prctl's option: the signal a process gets when its parent thread dies."""


def describe_exit(code: int) -> str:
    """``exit status 1``, or ``killed by SIGSEGV`` for a negative status."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


@dataclass
class Outcome:
    """What happened to one run."""

    run: PresetRun
    action: str
    """``skipped`` (already complete), ``busy`` (another process holds it), ``resumed`` or
    ``started``."""
    code: int
    """0: the run is complete now (or, busy, another process trains it); else the fit's
    exit status (1 when the fit returned but left no end-of-fit results; negative: killed
    by that signal)."""
    seconds: float
    status: RunStatus
    holder: str | None = None
    """Who holds a busy run."""
    cpu_s: float | None = None
    """CPU seconds of the fit's process (user and system)."""

    @property
    def result(self) -> str:
        if self.action == "busy":
            return f"in use by {self.holder}"
        return "complete" if self.code == 0 else f"failed ({describe_exit(self.code)})"


def _busy(status: RunStatus) -> str | None:
    """Who writes one of the run's version folders (a fit started outside this study)."""
    return next(filter(None, map(lock_holder, status.versions)), None)


def _clear_failed_starts(run: PresetRun, status: RunStatus, echo: Callable[[str], None]) -> None:
    for version in status.versions:
        with contextlib.suppress(RunInUseError):  # a fit took it since: it is not ours
            if version.is_dir() and remove_failed_start(version):
                echo(f"  cleared {version}: a start that stopped before its first checkpoint")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _save_record(run: PresetRun, outcome: Outcome, results: Path, echo) -> None:
    """The finished run's record under ``results`` (:mod:`lit_sparse_studies.study.recall_records`,
    :mod:`~lit_sparse_studies.study.cpu_records`); one already there is kept (a skipped run's
    record carries its first times)."""
    from lit_sparse_studies.study import cpu_records, recall_records
    from lit_sparse_studies.study.recall_records import source_commit, write_record

    labels = {"variant": run.variant.name, "seed": run.seed}
    if run.preset.measures == "recall":
        make_record = recall_records.make_record
        path = recall_records.record_file(results, run.setup.name, run.variant.name, run.seed)
        labels = {"task": run.setup.name, **labels}
    else:
        make_record = cpu_records.make_record
        path = cpu_records.record_file(results, run.variant.name, run.seed)
    if outcome.action == "skipped" and path.is_file():
        return
    trained = outcome.action != "skipped"
    record = make_record(
        outcome.status.run_dir,
        labels,
        wall_s=outcome.seconds if trained else None,
        cpu_s=outcome.cpu_s if trained else None,
        commit=source_commit(),
        keys=run.preset.setup_keys,
    )
    echo(f"  record: {write_record(path, record)}")


def _train(run, index, total, launch, extra, echo) -> Outcome:
    """One claimed run: skipped if complete, else resumed or started in its own process."""
    head = f"[{index}/{total}] {run.name}"
    status = run_status(run)
    if status.state is RunState.COMPLETE:
        echo(f"{head}: complete ({status.run_dir}, {status.detail}), skipped")
        return Outcome(run, "skipped", 0, 0.0, status)
    holder = _busy(status)
    if holder is not None:
        echo(f"{head}: in use by {holder}, skipped")
        return Outcome(run, "busy", 0, 0.0, status, holder)
    if status.state is RunState.NEW:
        _clear_failed_starts(run, status, echo)
    resume = status.state is RunState.INTERRUPTED
    args = run.fit_args(extra, resume=resume)
    action = "resumed" if resume else "started"
    echo(f"{head}: {'resuming' if resume else 'starting'}: python -m lit_sparse {' '.join(args)}")
    write_record(run, extra)
    start, cpu_start = time.perf_counter(), _children_cpu_s()
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
            f"({' and '.join(run.preset.results)} at max_steps, or an early stop) in "
            f"{run.experiment}"
        )
    outcome = Outcome(run, action, code, seconds, after, cpu_s=_children_cpu_s() - cpu_start)
    echo(f"{head}: {outcome.result} after {seconds:.0f} s")
    return outcome


def run_preset(
    runs: Sequence[PresetRun],
    launch: Launcher = fit_in_subprocess,
    extra: Sequence[str] = (),
    echo: Callable[[str], None] = print,
    results: Path | None = None,
) -> list[Outcome]:
    """Bring every run to complete, one after another.

    Every run's record is checked before anything is trained (a folder started with other
    options or edited configs is refused). Each run is claimed first (a run another live
    process holds is skipped, ``busy``); a run that fails, a crash or a kill of its process
    included, is reported and the next one starts; KeyboardInterrupt and SystemExit stop
    the whole study (the claimed run's fit is stopped with it). With ``results``, each
    complete run's record is written there as it finishes (a recall study's committed
    results), and a complete run without one gets it.
    """
    for run in runs:
        check_record(run, extra)
    outcomes = []
    for index, run in enumerate(runs, 1):
        try:
            claim = RunLock.acquire(run.experiment, "matrix --run")
        except RunInUseError:
            holder = lock_holder(run.experiment) or "another process"
            echo(f"[{index}/{len(runs)}] {run.name}: in use by {holder}, skipped")
            outcomes.append(Outcome(run, "busy", 0, 0.0, run_status(run), holder))
            continue
        try:
            outcome = _train(run, index, len(runs), launch, extra, echo)
            if results is not None and outcome.code == 0:
                _save_record(run, outcome, results, echo)
            outcomes.append(outcome)
        finally:
            claim.release()
    return outcomes
