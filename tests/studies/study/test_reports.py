"""What ``matrix --preset`` reports (lit_sparse_studies.study.reports): ``--list`` suggests a
``--run`` that runs, also after a smoke test (issue 57, minor)."""

from __future__ import annotations

import json
import shlex
import sys

import yaml

from lit_sparse.__main__ import main as lit_main
from lit_sparse_studies.study.preset import preset_runs, write_record

SMOKE = ["--trainer.max_steps", "4", "--data.init_args.seq_len", "32"]


def smoke_test(run) -> None:
    """What ``matrix --preset cpu ... --run --trainer.max_steps 4 ...`` left: a complete run
    of 4 steps, its record naming those options."""
    write_record(run, SMOKE)
    folder = run.experiment / "version_0"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"trainer": {"max_steps": 4}}))
    for name in ("extrapolation.json", "position_loss.json"):
        (folder / name).write_text(json.dumps({"step": 4}))


def test_list_after_a_smoke_test_suggests_a_run_that_is_not_refused(tmp_path, capsys, monkeypatch):
    """--list suggested ``--run`` with the preset's own options, which refuses a smoke test's
    runs; it says so, and suggests the command that goes on with their options."""
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    runs = preset_runs("cpu", [0], variants=["dense", "fib_fixed"], root=tmp_path)
    smoke_test(runs[0])
    base = ["matrix", "--preset", "cpu", "--seeds", "0", "--variants", "dense", "fib_fixed"]
    base += ["--root", str(tmp_path)]
    assert lit_main([*base, "--list"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "1 of them were trained with other options than the preset's" in last
    assert "give another --root" in last and "Run them" not in last
    suggested = shlex.split(last.split("trained with: ")[1])
    assert suggested[:3] == ["python", "-m", "lit_sparse"] and suggested[-4:] == SMOKE
    assert lit_main([*suggested[3:], "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dense/seed0: complete" in out and "--trainer.max_steps 4" in out


def test_list_of_a_fresh_root_suggests_the_plain_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    args = ["matrix", "--preset", "cpu", "--seeds", "0", "--variants", "dense"]
    assert lit_main([*args, "--root", str(tmp_path), "--list"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith(f"--variants dense --root {tmp_path} --run")
