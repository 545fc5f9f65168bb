"""The Lightning commands as a user runs them: what fit prints at the end, test on the
held-out sets, fast_dev_run, the refused optimizer options, no predict."""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
import tempfile
from pathlib import Path

import pytest

from lit_sparse.cli import LitSparseCLI, main

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"
STAGGERED = ["--config", str(ROOT / "configs" / "staggered.yaml"), "--config", str(TINY)]


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


@pytest.fixture(scope="module")
def fit_run(tmp_path_factory) -> tuple[Path, str]:
    """A tiny staggered fit through the CLI: its run folder and what it printed."""
    folder = tmp_path_factory.mktemp("cli_fit")
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.chdir(folder)
        assert main(["fit", *STAGGERED]) == 0
    return folder / "runs" / "staggered" / "version_0", out.getvalue()


def test_fit_ends_with_the_extrapolation_table_and_the_logs(fit_run):
    run, printed = fit_run
    table = (run / "extrapolation.md").read_text()
    assert "length extrapolation (extrapolation.md):" in printed
    assert table.strip() in printed
    assert "| set | 48 (1x) | 96 (2x) | 192 (4x) |" in printed
    assert "logs: runs/staggered/version_0  (tensorboard --logdir runs/staggered)" in printed
    assert printed.rstrip().endswith("(resume: fit ... --ckpt_path last)")


def markdown_rows(printed: str, header_start: str) -> tuple[list[str], dict[str, list[str]]]:
    """The Markdown table of ``printed`` whose header starts with ``header_start``: its
    header cells and its rows by first cell."""
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[start:]]
    rows = {}
    for row in cells[2:]:
        if len(row) != len(cells[0]):
            break
        rows[row[0]] = row[1:]
    return cells[0], rows


def test_no_hp_metric_placeholder_chart(fit_run):
    """Lightning's TensorBoardLogger writes hp_metric = -1 at step 0 and never again; the
    CLI turns it off (the saved config records it)."""
    from tests.tiny_runs import scalars

    run, _ = fit_run
    tags = set(scalars(run))
    assert "val/ppl" in tags and "hp_metric" not in tags
    assert "default_hp_metric: false" in (run / "config.yaml").read_text()


def test_fit_ends_with_the_held_out_table_and_its_mean(fit_run):
    """The last validation, a column per set and the mean over sets: the val/ppl the
    progress bar and the README quote, exp of the mean loss (issue 47: it was the mean of
    the sets' perplexities, which no Lightning or HF user reads it as), and a line that
    says so."""
    run, printed = fit_run
    assert "held-out sets at the last validation:" in printed
    header, rows = markdown_rows(printed, "| metric |")
    assert header == ["metric", "shakespeare", "math", "mean over sets"]
    assert set(rows) == {"val/loss", "val/ppl"}
    ppl = [float(v) for v in rows["val/ppl"]]
    loss = [float(v) for v in rows["val/loss"]]
    assert ppl[2] == pytest.approx(math.exp(loss[2]), rel=1e-3)
    geometric = math.exp((math.log(ppl[0]) + math.log(ppl[1])) / 2)
    assert ppl[2] == pytest.approx(geometric, rel=1e-3)
    assert "val/ppl, mean over sets: exp(val/loss)" in printed
    # the same windows at 1x (printed to 0.01; validation sums in float32, the evaluation in
    # float64: a relative 1e-5 apart, 0.02 at the untrained tiny model's perplexity of 12,677
    # on one machine)
    at_1x = json.loads((run / "extrapolation.json").read_text())["sets"]["shakespeare"]
    assert ppl[0] == pytest.approx(at_1x[str(min(map(int, at_1x)))]["ppl"], rel=1e-5, abs=0.01)


@pytest.mark.parametrize("command", ["validate", "test"])
def test_an_evaluation_prints_one_table_a_column_per_set(fit_run, command, capsys):
    """Not Lightning's table per data loader (two columns of the same values, named
    DataLoader 0 and 1): one row per metric, one column per held-out set."""
    run, _ = fit_run
    args = ["--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints/last.ckpt")]
    metrics = run_cli(run.parents[2], command, *args).trainer.callback_metrics
    printed = capsys.readouterr().out
    assert "DataLoader" not in printed
    prefix = "val" if command == "validate" else "test"
    assert f"held-out sets, {prefix}/* (" in printed
    header, rows = markdown_rows(printed, "| metric |")
    assert header == ["metric", "shakespeare", "math", "mean over sets"]
    assert list(rows) == [f"{prefix}/loss", f"{prefix}/ppl"]
    for i, name in enumerate(["shakespeare", "math"]):
        assert float(rows[f"{prefix}/ppl"][i]) == pytest.approx(
            float(metrics[f"{prefix}/ppl/{name}"]), abs=0.005
        )
    assert float(rows[f"{prefix}/ppl"][2]) == pytest.approx(
        float(metrics[f"{prefix}/ppl"]), abs=0.005
    )


def run_cli(folder: Path, *args: str) -> LitSparseCLI:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        return LitSparseCLI(list(args))


def test_test_scores_the_held_out_sets_as_validate_does(fit_run):
    run, _ = fit_run
    args = ["--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints/last.ckpt")]
    tested = run_cli(run.parents[2], "test", *args).trainer.callback_metrics
    validated = run_cli(run.parents[2], "validate", *args).trainer.callback_metrics
    sets = [key.split("/")[-1] for key in validated if key.startswith("val/ppl/")]
    assert sorted(sets) == ["math", "shakespeare"]
    for name in sets:
        assert float(tested[f"test/ppl/{name}"]) == pytest.approx(
            float(validated[f"val/ppl/{name}"]), rel=1e-6
        )
    assert float(tested["test/loss"]) == pytest.approx(float(validated["val/loss"]), rel=1e-6)


def test_predict_is_not_a_command(capsys):
    assert "predict" not in LitSparseCLI.subcommands()
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", *STAGGERED])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "invalid choice: 'predict'" in err
    assert len(err.splitlines()) == 1


@pytest.mark.slow
def test_fast_dev_run_runs_cleanly_and_keeps_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scratch = set(Path(tempfile.gettempdir()).glob("lit_sparse-fast_dev_run-*"))
    # a checkpoint folder named in a config goes to the temporary folder too
    named = tmp_path / "named_dirpath.yaml"
    named.write_text(
        "trainer:\n  callbacks:\n"
        "    - class_path: lightning.pytorch.callbacks.ModelCheckpoint\n"
        "      init_args: {dirpath: my_checkpoints, save_last: true}\n"
        "    - class_path: lit_sparse.callbacks.LengthExtrapolation\n"
    )
    for extra in ([], ["--config", str(named)]):
        assert main(["fit", *STAGGERED, *extra, "--trainer.fast_dev_run", "1"]) == 0
        out = capsys.readouterr().out
        assert "fast_dev_run: 1 optimizer step(s) ran; nothing was kept" in out
        assert [p.name for p in tmp_path.iterdir()] == ["named_dirpath.yaml"]
    assert set(Path(tempfile.gettempdir()).glob("lit_sparse-fast_dev_run-*")) == scratch


@pytest.mark.parametrize(
    "args",
    [
        ["--optimizer", "SGD"],
        ["--optimizer=torch.optim.SGD"],
        ["--lr_scheduler.class_path", "torch.optim.lr_scheduler.StepLR"],
    ],
)
def test_lightning_optimizer_options_are_refused(args, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["fit", *STAGGERED, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"error: {args[0].split('=')[0].split('.')[0]}: not supported")
    for option in ("--model.lr", "--model.warmup_steps", "--model.optimizer (adamw | adamw8bit)"):
        assert option in err
    assert list(tmp_path.iterdir()) == []


def test_an_optimizer_in_a_config_file_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "sgd.yaml"
    config.write_text("optimizer:\n  class_path: torch.optim.SGD\n  init_args:\n    lr: 0.1\n")
    assert main(["fit", *STAGGERED, "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: optimizer: torch.optim.SGD (in a config file): not supported; lit_sparse "
        "trains with its own AdamW and warmup + cosine schedule, set by --model.lr, "
        "--model.min_lr_ratio, --model.warmup_steps, --model.weight_decay, --model.betas, "
        "--model.eps and --model.optimizer (adamw | adamw8bit)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sgd.yaml"]
