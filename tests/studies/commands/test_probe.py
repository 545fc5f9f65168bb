"""``probe``: the depth-2 probe trains a few steps; its table; accuracy on >= 64 sequences."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lit_sparse.__main__ import main as lit_main
from lit_sparse.attention.gaussian_read import rung_width_at
from lit_sparse.runs.checkpoint_files import read_checkpoint
from lit_sparse.runs.locks import holds_lock
from lit_sparse_studies.study.probe import probe_parser, run_probe

pytestmark = pytest.mark.slow  # trains, starts processes or benches

ROOT = Path(__file__).resolve().parents[3]
PROBE_CONFIGS = ROOT / "configs" / "probe"


def main(argv):
    """``python -m lit_sparse probe ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["probe", *argv])


def test_depth2_trains_a_few_steps_and_prints_the_table(tmp_path, capsys):
    out = tmp_path / "probe"
    args = ["probe", "--depths", "2", "--inits", "uniform", "staggered", "--seeds", "0"]
    args += ["--reads", "interpolate", "--steps", "2", "--out", str(out), "--no-progress"]
    assert lit_main(args) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if line.startswith("| 2 |")]
    assert len(rows) == 4  # two runs, then two summary rows
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    # depth, init, read, seed, steps, alpha range, acc@200, acc@350, sequences, s, s/step
    assert cells[:5] == ["2", "uniform", "interpolate", "0", "2"]
    assert 0 <= float(cells[6]) <= 1 and 0 <= float(cells[7]) <= 1
    assert int(cells[8]) >= 64
    summary = [c.strip() for c in rows[3].strip("|").split("|")]
    assert summary[:3] == ["2", "staggered", "interpolate"]
    assert summary[-3:] == ["0.56-1.39", "0.99", "0.00"]  # the paper's row beside ours
    results = json.loads((out / "probe_table.json").read_text())
    assert [r["init"] for r in results] == ["uniform", "staggered"]
    for result in results:
        assert result["sequences"] >= 64 and result["step"] == 2
        assert sum(result["positions"].values()) > 64 * 200  # every scored position pooled
        assert Path(result["log_dir"], "probe.json").is_file()
    assert results[1]["alpha_range"][0] == pytest.approx(0.55, abs=0.01)
    assert (out / "probe_table.md").read_text().startswith("Runs")


def test_gaussian_read_anneals_its_width(tmp_path):
    run = run_probe(2, "uniform", 1, "gaussian", steps=2, out=tmp_path, progress_bar=False)
    assert run.read == "gaussian" and run.scores.sequences == 64
    # two optimizer steps of 2: the width was set from progress 1/2 at the last batch
    state = json.loads(Path(run.log_dir, "probe.json").read_text())
    assert state["step"] == 2
    width = rung_width_at(0.5, 40.0, 0.5, 0.8)  # 40 -> 0.5 over the first 80 %: 40 - 39.5 * 5/8
    assert width == pytest.approx(40 - 39.5 * 0.625)
    assert state["rung_widths"] == pytest.approx([width, width])


def test_a_cell_is_a_run_with_its_last_checkpoint(tmp_path):
    """A cell trains through fit's run handling: ``last.ckpt`` at the final step (written
    atomically, verified when read) and its folder's lock released when it is done."""
    run = run_probe(2, "uniform", 0, "interpolate", steps=2, out=tmp_path, progress_bar=False)
    assert Path(run.log_dir) == tmp_path / "depth2_uniform_interpolate" / "seed0"
    assert read_checkpoint(Path(run.log_dir, "checkpoints", "last.ckpt"))["global_step"] == 2
    assert not holds_lock(run.log_dir)


def test_a_cell_another_process_trains_is_refused(tmp_path, capsys):
    folder = tmp_path / "depth2_uniform_interpolate" / "seed0"
    code = (
        "import time; from lit_sparse.runs import RunLock; "
        f"RunLock.acquire({str(folder)!r}, 'probe'); print('held', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        args = ["--depths", "2", "--inits", "uniform", "--reads", "interpolate", "--seeds", "0"]
        assert main([*args, "--steps", "2", "--out", str(tmp_path), "--no-progress"]) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert f"error: {folder} is in use by process {holder.pid}" in err
    assert not (folder / "checkpoints").exists()


def test_too_few_held_out_sequences_are_refused(capsys, tmp_path):
    assert main(["--depths", "2", "--val-sequences", "10", "--out", str(tmp_path)]) == 2
    assert "--val-sequences=10: expected >= 64" in capsys.readouterr().err


def test_unknown_depth_names_the_available_configs(capsys, tmp_path):
    assert main(["--depths", "3", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--depths 3 --inits uniform: no config" in err and "depth2_uniform" in err


@pytest.mark.parametrize("depth", [2, 4, 8])
def test_configs_follow_the_paper(depth):
    for init in ("uniform", "staggered"):
        path = PROBE_CONFIGS / f"depth{depth}_{init}.yaml"
        cfg = probe_parser().parse_args(["--config", str(path)])
        args = cfg.model.attention.init_args
        assert cfg.model.arch.n_layers == depth and cfg.model.arch.d_model == 256
        assert (cfg.model.arch.n_heads, cfg.model.arch.n_kv_heads) == (4, 2)
        assert cfg.model.arch.vocab_size == 512 and cfg.model.arch.context_length == 512
        assert (args.window, args.n_rungs) == (8, 15)
        assert args.schedule.class_path == "lit_sparse.attention.schedules.Learned"
        assert cfg.data.distances == [200, 350] and cfg.data.batch_size == 2
        assert cfg.data.val_sequences >= 64
        assert cfg.model.lr == 1e-3 and cfg.model.weight_decay == 0.01
        assert cfg.model.min_lr_ratio == 1.0 and cfg.model.warmup_steps == 0
        assert cfg.trainer["max_steps"] == 2500
        staggered = [min(max(0.5 + i / (depth - 1), 0.55), 1.45) for i in range(depth)]
        schedule = args.schedule.init_args
        assert schedule.init == (None if init == "uniform" else pytest.approx(staggered))
        assert schedule.read == "interpolate"
