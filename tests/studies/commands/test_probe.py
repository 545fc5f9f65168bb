"""``probe``: the depth-2 probe trains a few steps; its table; accuracy on >= 64 sequences."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lit_sparse.__main__ import main as lit_main

pytestmark = pytest.mark.slow  # trains, starts processes or benches


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
