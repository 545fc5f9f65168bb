"""The choice tasks end to end: TaskAccuracy's history and scalars in a fit, and the ``tasks``
command on its checkpoint (the generators: test_lego.py, test_ruler.py; the scoring:
tests/evaluation/test_forced_choice.py)."""

from __future__ import annotations

import json

import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from lit_sparse.__main__ import main as lit_main
from lit_sparse.callbacks import TaskAccuracy


@pytest.mark.slow
def test_callback_logs_and_writes_and_the_command_reads_the_checkpoint(tmp_path, capsys):
    from tests.tiny_runs import LEARNED, fit_run, scalars

    callback = TaskAccuracy(per_group=6)
    checkpoint = ModelCheckpoint(save_last=True, every_n_train_steps=3)
    run = fit_run(tmp_path, "tasks", LEARNED, callbacks=[callback, checkpoint])
    state = json.loads((run.log_dir / "tasks.json").read_text())
    assert [entry["step"] for entry in state["history"]] == [3, 6]
    lego = state["tasks"]["lego"]
    assert lego["items"] == 18 and lego["chance"] == 0.5 and 0 <= lego["same_answer"] <= 1
    assert state["tasks"]["ruler_vt"]["chance"] == pytest.approx(1 / 9)
    logged = scalars(run.log_dir)
    for tag in ("tasks/lego/accuracy", "tasks/lego/chance", "tasks/ruler_vt/same_answer"):
        assert set(logged[tag]) == {3, 6}
    assert "tasks/ruler_vt/accuracy_4" in logged

    assert lit_main(["tasks", str(run.log_dir), "--per-group", "6"]) == 0
    out = capsys.readouterr().out
    assert "tokenizer embedded" in out
    rows = [line for line in out.splitlines() if line.startswith("| lego") or "| ruler" in line]
    assert len(rows) == 8  # 3 groups + all, per task
    total = next(r for r in rows if r.startswith("| lego | all"))
    cells = [c.strip() for c in total.strip("|").split("|")]
    assert float(cells[3]) == pytest.approx(lego["accuracy"], abs=5e-5)  # printed to 4 places
    assert float(cells[4]) == 0.5
