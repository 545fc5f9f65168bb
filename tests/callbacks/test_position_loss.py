"""PositionLoss: bins as docs/paper.md section 5, values equal a direct per-position
computation on the same windows, tags, image and JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from lit_sparse.callbacks import PositionLoss, bin_edges
from tests.tiny_runs import (
    N_BINS,
    SEQ_LEN,
    VAL_WINDOWS,
    custom_scalar_charts,
    read_events,
    scalars,
    tiny_trainer,
)


def direct_bins(module, datamodule, set_name: str, n_bins: int) -> tuple[np.ndarray, int]:
    """Per-position mean NLL over the validation windows, then the mean within each bin."""
    module.eval()
    rows = []
    with torch.inference_mode():  # as validation; no autograd state
        for x, y in datamodule.val_windows_at(SEQ_LEN, set_name):
            rows.append(module.token_nll(x, y).double())
    nll = torch.cat(rows)  # (windows, T)
    per_position = nll.mean(0).numpy()
    edges = bin_edges(SEQ_LEN, n_bins)
    return np.array(
        [per_position[a:b].mean() for a, b in zip(edges, edges[1:], strict=False)]
    ), len(nll)


def test_logged_bins_equal_a_direct_per_position_computation(learned_run):
    """The fit's last validation (step 6) used the final weights: same windows, same model."""
    logged = scalars(learned_run.log_dir)
    for name in learned_run.datamodule.val_set_names:
        expected, windows = direct_bins(learned_run.module, learned_run.datamodule, name, N_BINS)
        assert windows == VAL_WINDOWS
        got = [logged[f"val/pos_nll/{name}/b{k}"][6] for k in range(N_BINS)]
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_validate_gives_the_same_bins(learned_run, tmp_path):
    callback = PositionLoss(n_bins=8, image=False)
    trainer = tiny_trainer(tmp_path, "validate", [callback])
    trainer.validate(learned_run.module, datamodule=learned_run.datamodule, verbose=False)
    for name in learned_run.datamodule.val_set_names:
        expected, _ = direct_bins(learned_run.module, learned_run.datamodule, name, 8)
        np.testing.assert_allclose(callback.latest[name], expected, rtol=1e-6)


def test_tags_image_and_json_in_the_run_directory(learned_run):
    events = read_events(learned_run.log_dir)
    tags = set(events.Tags()["scalars"])
    names = learned_run.datamodule.val_set_names
    assert {f"val/pos_nll/{n}/b{k}" for n in names for k in range(N_BINS)} <= tags
    assert [image.step for image in events.Images("val/pos_nll")] == [3, 6]
    written = json.loads((learned_run.log_dir / "position_loss.json").read_text())
    assert written["format"] == "lit_sparse.position_loss/1"
    assert written["edges"] == [0, 8, 16, 24, 32] and written["length"] == SEQ_LEN
    assert [entry["step"] for entry in written["history"]] == [3, 6]
    assert written["windows"] == {n: VAL_WINDOWS for n in names}
    logged = scalars(learned_run.log_dir)
    for name in names:
        np.testing.assert_allclose(
            written["sets"][name],
            [logged[f"val/pos_nll/{name}/b{k}"][6] for k in range(N_BINS)],
            rtol=1e-6,
        )


def test_one_chart_per_held_out_set_with_a_line_per_bin(learned_run):
    """One run per training run (issue 57): the run's one Custom Scalars layout has a chart
    per set matching that set's bin tags val/pos_nll/<set>/b<k> in the run itself, beside the
    alpha chart; no bin is a run of its own."""
    import re

    charts = custom_scalar_charts(learned_run.log_dir)
    names = learned_run.datamodule.val_set_names
    assert set(charts) == {"alpha per layer", *(f"NLL by position: {n}" for n in names)}
    logged = scalars(learned_run.log_dir)
    for name in names:
        [pattern] = charts[f"NLL by position: {name}"]
        matched = [t for t in logged if re.match(pattern, t)]
        assert matched == [f"val/pos_nll/{name}/b{k}" for k in range(N_BINS)]
    assert not (learned_run.log_dir / "pos_nll").exists()


def test_bin_runs_give_each_bin_its_own_named_run(staggered_run):
    """bin_runs: TensorBoard colours lines by run, so each bin is its own run
    pos_nll/<first>-<last> (edges 0, 8, 16, 24, 32) holding val/pos_nll/<set>."""
    import re

    log_dir = staggered_run.log_dir
    logged = scalars(log_dir)
    runs = sorted(p.name for p in (log_dir / "pos_nll").iterdir())
    assert runs == ["00-07", "08-15", "16-23", "24-31"]
    charts = custom_scalar_charts(log_dir)
    for name in staggered_run.datamodule.val_set_names:
        [pattern] = charts[f"NLL by position: {name}"]
        for k, run in enumerate(runs):
            tags = scalars(log_dir / "pos_nll" / run)
            [tag] = [t for t in tags if re.match(pattern, t)]
            assert tag == f"val/pos_nll/{name}" and tags[tag] == logged[f"{tag}/b{k}"]


@pytest.mark.parametrize("bad", [0, True, 2.0])
def test_n_bins_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="n_bins"):
        PositionLoss(n_bins=bad)
