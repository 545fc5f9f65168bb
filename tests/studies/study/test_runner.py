"""The study runner's claims: a run another live process holds is skipped (and the next one
trained), a dead process's claim is taken over, a start that died before its first
checkpoint is cleared and its number reused, its options pin nothing, and a run whose fit
crashes is reported while the study goes on. The fit is stood in for by a launcher that
writes what a finished fit leaves (tests/studies/commands/test_matrix_preset.py runs real fits)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import yaml

from lit_sparse.runs import RunLock
from lit_sparse_studies.study.preset import RECORD, preset_runs
from lit_sparse_studies.study.runner import describe_exit, run_preset


def runs(root, variants=("dense", "fib_fixed")):
    return preset_runs("cpu", [0], variants=list(variants), root=root)


class FinishingLauncher:
    """Stands in for ``fit``: records its arguments and leaves the run complete (config.yaml
    and the end-of-fit results at max_steps) in the next version folder; ``codes`` gives an
    exit status per run name instead (negative: killed by that signal, nothing written)."""

    def __init__(self, runs, codes=None):
        self.by_args = {tuple(run.fit_args()): run for run in runs}
        self.codes, self.calls, self.versions_at_launch = codes or {}, [], []

    def __call__(self, args):
        run = self.by_args[tuple(a for a in args if a not in ("--ckpt_path", "last"))]
        self.calls.append(run.name)
        self.versions_at_launch.append(sorted(p.name for p in run.experiment.glob("version_*")))
        if run.name in self.codes:
            return self.codes[run.name]
        n = len(list(run.experiment.glob("version_*")))
        folder = run.experiment / f"version_{n}"
        (folder / "checkpoints").mkdir(parents=True)
        (folder / "checkpoints" / "last.ckpt").write_bytes(b"")
        (folder / "config.yaml").write_text(yaml.safe_dump({"trainer": {"max_steps": 6}}))
        (folder / "extrapolation.json").write_text(json.dumps({"step": 6}))
        (folder / "position_loss.json").write_text(json.dumps({"step": 6}))
        return 0


def hold(folder) -> subprocess.Popen:
    """A real process holding ``folder``'s lock (as another ``matrix --run`` claims a run)."""
    code = (
        "import time; from lit_sparse.runs import RunLock; "
        f"RunLock.acquire({str(folder)!r}, 'matrix --run'); print('held', flush=True); "
        "time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.slow  # starts a process holding the claim
def test_a_run_another_process_holds_is_skipped_and_the_next_one_trained(tmp_path):
    study = runs(tmp_path)
    launch, lines = FinishingLauncher(study), []
    holder = hold(study[0].experiment)
    try:
        outcomes = run_preset(study, launch, echo=lines.append)
    finally:
        holder.kill()
        holder.wait()
    assert launch.calls == ["fib_fixed/seed0"], "the held run is not trained a second time"
    busy = outcomes[0]
    assert busy.action == "busy" and busy.code == 0 and f"process {holder.pid}" in busy.result
    assert lines[0].startswith("[1/2] dense/seed0: in use by process ") and "skipped" in lines[0]
    assert outcomes[1].action == "started" and outcomes[1].result == "complete"
    assert not list(study[0].experiment.glob("version_*"))


@pytest.mark.slow  # starts a process holding the claim
def test_the_claim_of_a_process_that_died_is_taken_over(tmp_path):
    [run] = runs(tmp_path, ["dense"])
    holder = hold(run.experiment)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    launch = FinishingLauncher([run])
    [outcome] = run_preset([run], launch, echo=lambda line: None)
    assert launch.calls == [run.name] and outcome.result == "complete"
    RunLock.acquire(run.experiment).release()  # and the claim is free again afterwards


def test_a_start_that_died_before_its_first_checkpoint_is_cleared_and_reused(tmp_path):
    [run] = runs(tmp_path, ["dense"])
    failed = run.experiment / "version_0"
    (failed / "checkpoints").mkdir(parents=True)
    for name in ("config.yaml", "hparams.yaml", "events.out.tfevents.1.host.2.0", ".lock"):
        (failed / name).write_text("x")
    (failed / "checkpoints" / ".last.ckpt.tmp-1-abcd1234").write_bytes(b"partial")
    launch, lines = FinishingLauncher([run]), []
    run_preset([run], launch, echo=lines.append)
    assert launch.versions_at_launch == [[]], "cleared before the fit started"
    assert sorted(p.name for p in run.experiment.glob("version_*")) == ["version_0"]
    assert any(f"cleared {failed}" in line for line in lines), lines


def test_a_folder_holding_more_than_a_failed_start_is_kept(tmp_path):
    [run] = runs(tmp_path, ["dense"])
    kept = run.experiment / "version_0"
    kept.mkdir(parents=True)
    (kept / "config.yaml").write_text("x")
    (kept / "notes.md").write_text("mine")
    launch = FinishingLauncher([run])
    run_preset([run], launch, echo=lambda line: None)
    assert (kept / "notes.md").read_text() == "mine"
    assert launch.versions_at_launch == [["version_0"]]


def test_the_options_of_a_failed_start_pin_nothing(tmp_path):
    """A first attempt with a bad option died before any checkpoint; the corrected rerun
    (other options) is not refused, and its own options become the record."""
    [run] = runs(tmp_path, ["dense"])
    launch = FinishingLauncher([run], codes={run.name: 2})
    run_preset([run], launch, ["--model.lr", "-1"], echo=lambda line: None)
    (run.experiment / "version_0").mkdir()  # as the failed fit left it
    (run.experiment / "version_0" / "config.yaml").write_text("x")
    launch = FinishingLauncher([run])
    [outcome] = run_preset([run], launch, echo=lambda line: None)
    assert outcome.result == "complete"
    assert "--model.lr" not in (run.experiment / RECORD).read_text()


def test_a_crashed_fit_is_reported_and_the_study_goes_on(tmp_path):
    study = runs(tmp_path)
    launch, lines = FinishingLauncher(study, codes={"dense/seed0": -signal.SIGSEGV}), []
    outcomes = run_preset(study, launch, echo=lines.append)
    assert [o.result for o in outcomes] == ["failed (killed by SIGSEGV)", "complete"]
    assert "[1/2] dense/seed0: failed (killed by SIGSEGV) after 0 s" in lines
    assert describe_exit(-9) == "killed by SIGKILL" and describe_exit(2) == "exit status 2"


@pytest.mark.slow  # starts a process holding the claim
def test_a_claimed_run_is_released_after_it_ran(tmp_path):
    [run] = runs(tmp_path, ["dense"])
    run_preset([run], FinishingLauncher([run], codes={run.name: 1}), echo=lambda line: None)
    holder = hold(run.experiment)  # another process can claim it now
    holder.kill()
    holder.wait()


def test_ctrl_c_stops_the_study_and_releases_the_claim(tmp_path):
    [run] = runs(tmp_path, ["dense"])

    def interrupted(args):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_preset([run], interrupted, echo=lambda line: None)
    RunLock.acquire(run.experiment).release()


SMOKE = ["--trainer.max_steps", "4", "--data.init_args.seq_len", "32"]


def smoke_test(run, checkpoint: bool):
    """What ``matrix --preset ... --run --trainer.max_steps 4 ...`` left: a complete run of
    4 steps, its record naming those options (its checkpoint deleted to save disk, or not)."""
    from lit_sparse_studies.study.preset import write_record

    write_record(run, SMOKE)
    folder = run.experiment / "version_0"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"trainer": {"max_steps": 4}}))
    (folder / "extrapolation.json").write_text(json.dumps({"step": 4}))
    (folder / "position_loss.json").write_text(json.dumps({"step": 4}))
    if checkpoint:
        (folder / "checkpoints").mkdir()
        (folder / "checkpoints" / "last.ckpt").write_bytes(b"")


@pytest.mark.parametrize("checkpoint", [True, False])
def test_a_smoke_tests_complete_run_is_not_complete_for_other_options(tmp_path, checkpoint):
    """Issue 47: after a smoke test (other options), the real --run skipped its runs as
    complete. A run's completeness includes the options it was trained with: it is refused,
    naming the options, before anything is trained."""
    from lit_sparse.errors import ConfigError

    [run] = runs(tmp_path, ["dense"])
    smoke_test(run, checkpoint)
    launch = FinishingLauncher([run])
    with pytest.raises(ConfigError, match="was started with options .*--trainer.max_steps 4"):
        run_preset([run], launch, echo=lambda line: None)
    assert launch.calls == []
    outcomes = run_preset([run], launch, SMOKE, echo=lambda line: None)  # the same options
    assert [o.action for o in outcomes] == ["skipped"]


def test_list_and_dry_run_name_a_smoke_tests_options(tmp_path, capsys, monkeypatch):
    """--list shows the options a complete run was trained with where they are not the
    preset's own; --run --dry-run with other options is refused as --run is."""
    from lit_sparse.__main__ import main as lit_main

    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    [run] = runs(tmp_path, ["dense"])
    smoke_test(run, checkpoint=False)
    base = ["matrix", "--preset", "cpu", "--seeds", "0", "--variants", "dense"]
    base += ["--root", str(tmp_path)]
    assert lit_main([*base, "--list"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "dense/seed0" in line)
    assert "complete (step 4; trained with extra options --trainer.max_steps 4 " in row
    assert lit_main([*base, "--run", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was started with options" in err[0]


CHILD = """
import os, pathlib, sys, time
out = pathlib.Path(sys.argv[1])
try:
    out.write_text(f"started {os.getpid()}")
    time.sleep(120)
except KeyboardInterrupt:
    out.write_text(f"interrupted {os.getpid()}")
"""


@pytest.mark.slow  # real processes: a study and its fit
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_stopped_study_interrupts_its_fit(tmp_path, stop):
    """A ``matrix --run`` stopped with SIGTERM (kill, a scheduler) or killed outright left its
    fit training on, unclaimed; the fit is now interrupted as on Ctrl-C."""
    import os
    import time

    out = tmp_path / "child.txt"
    study = (
        "import sys; from lit_sparse_studies.study.runner import run_child; "
        f"run_child([sys.executable, '-c', {CHILD!r}, {str(out)!r}])"
    )
    parent = subprocess.Popen([sys.executable, "-c", study], stderr=subprocess.DEVNULL)

    def child_says(word: str) -> int:
        for _ in range(600):
            text = out.read_text() if out.exists() else ""
            if text.startswith(word):
                return int(text.split()[1])
            time.sleep(0.05)
        raise AssertionError(f"the fit never said {word!r}: {text!r}")

    pid = child_says("started")
    parent.send_signal(stop)
    assert parent.wait(timeout=30) != 0
    assert child_says("interrupted") == pid
    for _ in range(200):  # and it is gone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the fit {pid} still runs")
