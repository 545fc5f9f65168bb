"""A newcomer's first hour (issue 47): what the commands print and log around a run, beyond
the numbers: evaluations' charts at the checkpoint's step and where they went, the end-of-fit
evaluation announced (skipped under fast_dev_run)."""

from __future__ import annotations

import pytest

from .cli_runs import config_args, copy_run

pytestmark = pytest.mark.slow


def _main(args: list[str], capsys) -> tuple[int, str, str]:
    """``main(args)`` in this process: exit status, stdout and stderr."""
    from lit_sparse.cli import main

    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _steps(folder) -> dict[str, set[int]]:
    """tag -> the steps its scalars and images were written at, in one TensorBoard run."""
    from tests.tiny_runs import read_events

    events = read_events(folder)
    tags = events.Tags()
    steps = {tag: {e.step for e in events.Scalars(tag)} for tag in tags["scalars"]}
    steps.update({tag: {e.step for e in events.Images(tag)} for tag in tags["images"]})
    return steps


def test_evaluations_log_at_the_checkpoints_step_and_say_where(finished_run, in_workdir, capsys):
    """validate, extrapolate and test logged their figures, position curves and metrics at
    step 0 (the checkpoint is step 4), and each bin of the position loss as its own run: stray
    points at x = 0 and extra lines in the training run's charts. Now every tag sits at the
    checkpoint's step, only the training run has bin runs, and validate/test print their
    log folder."""
    run = copy_run(finished_run, in_workdir)
    ckpt = ["--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints/last.ckpt")]
    for command in ("validate", "test", "extrapolate"):
        code, out, err = _main([command, *ckpt], capsys)
        assert code == 0, err
        if command != "extrapolate":  # extrapolate names its written table
            assert f"logs: {run / 'evals' / f'{command}-step4'}" in out, out
    for name in ("validate-step4", "test-step4", "extrapolate-step4"):
        folder = run / "evals" / name
        steps = _steps(folder)
        assert steps, name
        wrong = {tag: s for tag, s in steps.items() if s != {4}}
        assert not wrong, f"{name}: {wrong}"
        assert not (folder / "pos_nll").exists(), "bin runs belong to the training run's chart"
    assert {"val/pos_nll", "alpha/heatmap", "val/ppl"} <= set(_steps(run / "evals/validate-step4"))
    assert "test/ppl" in _steps(run / "evals/test-step4")


def test_the_end_of_fit_evaluation_is_announced_and_skipped_under_fast_dev_run(in_workdir, capsys):
    """The end-of-fit extrapolation ran with nothing printed while the bar sat at its last
    step (13 s on the quickstart); fast_dev_run spent 10 s on it, then removed the result
    with the rest of its files. Now a fit says what runs and how long it took, and
    fast_dev_run skips it with one line."""
    code, out, err = _main(["fit", *config_args("fixed.yaml")], capsys)
    assert code == 0, err
    assert "the length extrapolation of the trained weights (step 4) ..." in err
    assert "the length extrapolation: done in" in err

    code, out, err = _main(
        ["fit", *config_args("fixed.yaml"), "--trainer.fast_dev_run", "1"], capsys
    )
    assert code == 0, err
    assert "fast_dev_run: the length extrapolation at the end of fit is skipped" in err
    assert "of the trained weights" not in err
