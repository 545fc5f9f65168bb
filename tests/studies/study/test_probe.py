"""The probe study's cells (lit_sparse_studies/study/probe.py): a cell is a run with its last
checkpoint, the gaussian read anneals its width, and the configs follow the paper. The
command: tests/studies/commands/test_probe.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lit_sparse.attention.gaussian_read import rung_width_at
from lit_sparse.runs.checkpoint_files import read_checkpoint
from lit_sparse.runs.locks import holds_lock
from lit_sparse_studies.study.probe import probe_parser, run_probe

pytestmark = pytest.mark.slow  # trains, starts processes or benches

PROBE_CONFIGS = Path(__file__).resolve().parents[3] / "configs" / "probe"


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
