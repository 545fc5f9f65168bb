"""The observers with the logger a user picks: one step per validation on TensorBoard,
labelled figures, and with CSVLogger every observer's scalars in metrics.csv and its figures
as PNG files in the run folder."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from lit_sparse.callbacks.images import cell_edges, heatmap_image, image_path
from lit_sparse.cli import main
from tests.tiny_runs import STAGGERED, fit_run, read_events

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"


def test_every_tag_of_a_validation_is_on_one_step(learned_run):
    """Lightning's own val/* tags, the observers' scalars and images, throughput: the
    validations after optimizer steps 3 and 6 land on steps 3 and 6."""
    events = read_events(learned_run.log_dir)
    tags = events.Tags()
    validation_tags = [tag for tag in tags["scalars"] if tag.startswith(("val/", "validate/"))] + [
        f"image:{tag}" for tag in tags["images"]
    ]
    expected = {"val/loss", "val/ppl/shakespeare", "val/pos_nll/math/b0", "validate/total/seconds"}
    assert expected <= set(validation_tags)
    assert {"image:alpha/heatmap", "image:val/pos_nll"} <= set(validation_tags)
    for tag in validation_tags:
        if tag.startswith("image:"):
            steps = [event.step for event in events.Images(tag[len("image:") :])]
        else:
            steps = [event.step for event in events.Scalars(tag)]
        assert sorted(set(steps)) == [3, 6], tag


def test_checkpoints_between_validations_name_their_own_step(tmp_path):
    """The step the validation logged for its tags is not the later checkpoints' step."""
    every_step = ModelCheckpoint(every_n_train_steps=1, save_top_k=-1)
    run = fit_run(tmp_path, "steps", STAGGERED, max_steps=5, callbacks=[every_step])
    names = sorted(p.name for p in (run.log_dir / "checkpoints").glob("*.ckpt"))
    assert names == [f"epoch=0-step={step}.ckpt" for step in range(1, 6)]


def test_heatmap_columns_start_at_the_first_record():
    assert cell_edges([0, 25, 50]).tolist() == [0, 25, 50, 75]
    assert cell_edges([100]).tolist() == [100, 101]  # a resumed run's first record
    assert cell_edges([0, 25, 50, 60]).tolist() == [0, 25, 50, 60, 70]


def test_heatmap_is_a_labelled_figure():
    image = heatmap_image(np.ones((16, 3)), [0, 25, 50], "alpha per layer", "step", "layer")
    assert image.shape == (320, 512, 3) and image.dtype == np.uint8  # the figure, not a strip
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 50  # text, ticks, colour bar


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory) -> tuple[Path, str]:
    """``fit --config configs/learned.yaml --trainer.logger CSVLogger`` (tiny), through the
    CLI: the run folder and what fit printed."""
    folder = tmp_path_factory.mktemp("csv")
    out = io.StringIO()
    args = ["fit", "--config", str(ROOT / "configs" / "learned.yaml"), "--config", str(TINY)]
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.chdir(folder)
        patch.setattr(sys, "argv", ["lit_sparse"])
        assert main([*args, "--trainer.logger", "CSVLogger"]) == 0
    return folder / "runs" / "learned" / "version_0", out.getvalue()


def test_csv_logger_gets_every_observers_scalars(csv_run):
    run, _ = csv_run
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    steps: dict[str, set[int]] = {}
    for row in rows:
        for key, value in row.items():
            if value not in ("", None) and key != "step":
                steps.setdefault(key, set()).add(int(row["step"]))
    # alpha every 25 steps and at the end; validation every 2 optimizer steps (4 micro-batches)
    assert steps["alpha/layer_00"] == steps["alpha/layer_01"] == {0, 4}
    assert steps["val/pos_nll/shakespeare/b7"] == steps["val/loss"] == {2, 4}
    assert steps["extrap/ppl/math/192"] == {4}
    assert {"train/loss", "train/total/windows", "validate/total/seconds"} <= set(steps)
    assert steps["validate/total/seconds"] == {2, 4}


def test_csv_logger_gets_the_figures_as_files_and_the_tables(csv_run):
    run, _ = csv_run
    for tag in ("alpha/heatmap", "val/pos_nll"):
        png = image_path(run, tag, 4)
        assert png.is_file(), png
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((run / "alpha_trajectory.json").read_text())["steps"] == [0, 4]
    assert json.loads((run / "position_loss.json").read_text())["step"] == 4
    assert json.loads((run / "extrapolation.json").read_text())["lengths"] == [48, 96, 192]
    assert (run / "checkpoints" / "last.ckpt").is_file()


def test_the_hint_names_the_logger_in_use(csv_run):
    _, printed = csv_run
    assert "logs: runs/learned/version_0  (CSVLogger: metrics.csv; figures in images/)" in printed
    assert "tensorboard" not in printed
