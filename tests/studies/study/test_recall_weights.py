"""The weights the recall study commits (``docs/recall-study/weights/<task>-<variant>-seed<K>``):
each export loads and scores its own record's accuracy on the held-out examples regenerated
from the data module, and the page's snippet that rescores one on examples of one's own runs
as written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lit_sparse import LanguageModel
from lit_sparse.evaluation.recall import evaluate_recall
from lit_sparse_studies.study.recall_report import held_out_module

ROOT = Path(__file__).resolve().parents[3]
WEIGHTS = ROOT / "docs" / "recall-study" / "weights"
RESULTS = ROOT / "docs" / "recall-study" / "results"
EXPORTS = sorted(p.name for p in WEIGHTS.iterdir())


def test_far_mqar_dense_and_best_sparse_and_every_mqar64_variant_are_committed():
    assert {"far_mqar-dense-seed0", "far_mqar-sw_cache-seed0"} <= set(EXPORTS), EXPORTS
    assert len([name for name in EXPORTS if name.startswith("mqar64-")]) == 8, EXPORTS


@pytest.mark.parametrize("name", EXPORTS)
def test_the_weights_score_their_record_on_its_held_out_examples(name):
    task, variant, seed = name.split("-")
    record = json.loads((RESULTS / task / variant / f"{seed}.json").read_text())
    data = held_out_module(record["setup"])
    ((set_name, _),) = data.recall_sets().items()
    model = LanguageModel.from_pretrained(WEIGHTS / name)
    scored = evaluate_recall(model, data, [data.seq_len], ["use"])
    accuracy = scored.accuracy("use", data.seq_len, set_name)
    recorded = record["recall"]["scores"]["use"][str(data.seq_len)][set_name]["accuracy"]
    assert accuracy == pytest.approx(recorded, abs=1e-9)


def test_the_pages_rescoring_snippet_runs_as_written(monkeypatch, capsys):
    page = (ROOT / "docs" / "recall-study.md").read_text()
    (snippet,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "weights" in b]
    monkeypatch.chdir(ROOT)
    exec(compile(snippet, "recall-study.md", "exec"), {})
    accuracy = float(capsys.readouterr().out.split()[-1])
    assert accuracy > 0.9  # dense's weights on examples they never saw
