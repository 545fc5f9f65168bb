"""Evaluations of a run write under the run (``evals/``), never a ``version_N`` that looks
like a training run; load_run and matrix --table read the run that has a checkpoint."""

from __future__ import annotations

import json

import lit_sparse
from lit_sparse_studies.study.paper_tables import read_run

from .cli_runs import copy_run, run_cli


def test_validate_and_extrapolate_write_under_the_evaluated_run(finished_run, in_workdir, capsys):
    run = copy_run(finished_run, in_workdir)
    table = json.loads((run / "extrapolation.json").read_text())
    ckpt = ["--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints/last.ckpt")]
    assert run_cli(["validate", *ckpt], capsys)[0] == 0
    assert run_cli(["extrapolate", *ckpt, "--lengths", "[48, 96]"], capsys)[0] == 0
    assert run_cli(["extrapolate", *ckpt, "--lengths", "[48]"], capsys)[0] == 0

    assert [p.name for p in run.parent.iterdir()] == ["version_0"], "no new run folder"
    evals = sorted(p.name for p in (run / "evals").iterdir())
    # beside the end of fit's own (fit-step4)
    assert evals == ["extrapolate-step4", "extrapolate-step4-2", "fit-step4", "validate-step4"]
    adhoc = json.loads((run / "evals/extrapolate-step4/extrapolation.json").read_text())
    assert adhoc["lengths"] == [48, 96]
    assert json.loads((run / "extrapolation.json").read_text()) == table, "the run's own table"

    # what load_run and matrix --table read for the experiment is still the training run
    loaded = lit_sparse.load_run(run.parent, load_model=False)
    assert loaded.path == run and loaded.extrapolation.lengths == table["lengths"]
    assert read_run(run.parent).extrapolation.lengths == table["lengths"]


def test_load_run_of_an_experiment_picks_the_newest_run_with_a_checkpoint(finished_run, in_workdir):
    run = copy_run(finished_run, in_workdir)
    # an evaluation folder as earlier versions created it: a config and a table, no checkpoint
    old_eval = run.parent / "version_1"
    old_eval.mkdir()
    (old_eval / "config.yaml").write_text((run / "config.yaml").read_text())
    (old_eval / "extrapolation.json").write_text((run / "extrapolation.json").read_text())
    assert lit_sparse.load_run(run.parent, load_model=False).path == run
    assert read_run(run.parent).path == run
