"""``python -m lit_sparse extrapolate --config <run config> --ckpt_path <ckpt>``: the same
evaluation as the end-of-fit callback, on any checkpoint, with lengths and new_offsets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lit_sparse
from lit_sparse.__main__ import main
from lit_sparse.evaluation import evaluate_lengths

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory) -> Path:
    """A staggered run through the CLI (training length 48, 4 steps)."""
    folder = tmp_path_factory.mktemp("cli")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        assert (
            main(
                ["fit", "--config", str(ROOT / "configs" / "staggered.yaml"), "--config", str(TINY)]
            )
            == 0
        )
    return folder / "runs" / "staggered" / "version_0"


def extrapolate(run: Path, *args: str) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(run.parent.parent.parent)
        assert (
            main(
                [
                    "extrapolate",
                    "--config",
                    str(run / "config.yaml"),
                    "--ckpt_path",
                    str(run / "checkpoints" / "last.ckpt"),
                    *args,
                ]
            )
            == 0
        )
    # the evaluation writes under the run (evals/), never a version_N of its own
    assert [p.name for p in run.parent.glob("version_*")] == [run.name]
    newest = max((run / "evals").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    assert newest.name.startswith("extrapolate-step4")
    return json.loads((newest / "extrapolation.json").read_text())


def test_a_checkpoint_gives_the_end_of_fit_table(cli_run, capsys):
    table = extrapolate(cli_run)
    printed = capsys.readouterr().out
    at_fit = json.loads((cli_run / "extrapolation.json").read_text())
    assert table["lengths"] == at_fit["lengths"] == [48, 96, 192]
    assert table["step"] == at_fit["step"] == 4
    assert table["checkpoint"].endswith("last.ckpt")
    for name, per_length in at_fit["sets"].items():
        for length, values in per_length.items():
            assert table["sets"][name][length]["ppl"] == pytest.approx(values["ppl"], rel=1e-6)
            assert table["sets"][name][length]["windows"] == values["windows"]
    assert table["unseen_distances"] == at_fit["unseen_distances"]
    assert "| set | 48 (1x) | 96 (2x) | 192 (4x) | 96 vs 48 | 192 vs 48 |" in printed


def test_lengths_and_new_offsets_options(cli_run, capsys):
    table = extrapolate(cli_run, "--lengths", "[48, 96]", "--new_offsets", "drop")
    assert table["lengths"] == [48, 96] and table["new_offsets"] == "drop"
    assert table["unseen_distances"] == {"96": {"0": [], "1": []}}
    run = lit_sparse.load_run(cli_run / "checkpoints" / "last.ckpt")
    from lit_sparse.data import TextDataModule

    data = run.config["data"]["init_args"]
    dm = TextDataModule(**{k: v for k, v in data.items() if k != "sources"})
    dm.setup("validate")
    expected = evaluate_lengths(run.module, dm, [48, 96], new_offsets="drop")
    for name in dm.val_set_names:
        for length in (48, 96):
            assert table["sets"][name][str(length)]["ppl"] == pytest.approx(
                expected.ppl(name, length), rel=1e-6
            )
    printed = capsys.readouterr().out
    assert "new_offsets: drop" in printed  # the option's own value, as it is given


def test_the_training_length_is_always_the_baseline(cli_run, capsys):
    """--lengths without the training length: it is evaluated too, so every change is
    against it, as the table says; the output names the files it wrote."""
    table = extrapolate(cli_run, "--lengths", "96", "192")
    assert table["lengths"] == [48, 96, 192] and table["reference_length"] == 48
    assert table["new_offsets"] == "use"  # the model's own value, named
    printed = capsys.readouterr().out
    assert "changes against the training length 48" in printed
    assert "| set | 48 (1x) | 96 (2x) | 192 (4x) | 96 vs 48 | 192 vs 48 |" in printed
    newest = max((cli_run / "evals").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    stem = newest / "extrapolation"
    assert f"written to {stem}.json and {stem}.md" in printed
