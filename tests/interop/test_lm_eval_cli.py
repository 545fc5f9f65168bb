"""python -m lit_sparse lm-eval: lm-eval's own command line with the lit_sparse model, on a
shipped task, offline; its per-document scores against lit_sparse.score; lm-eval's ``hf``
model on an export once the export loads in transformers."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

import lit_sparse
from lit_sparse.interop.shipped_tasks import TASKS_DIR

pytest.importorskip("lm_eval")
pytestmark = pytest.mark.slow  # starts lm-eval in a process

LIMIT = 3


def lm_eval(args: list[str], cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "lit_sparse", "lm-eval", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
        env=env,
    )


def test_a_shipped_rolling_task_runs_offline_and_scores_documents_as_score_does(
    random_export, tmp_path
):
    out = tmp_path / "results"
    done = lm_eval(
        [
            "--model", "lit_sparse",
            "--model_args", f"pretrained={random_export},max_length=512",
            "--device", "cpu",  # lm-eval's own option (a device in model_args clashes with it)
            "--tasks", "lit_sparse_math_ppl",
            "--include_path", str(TASKS_DIR),
            "--limit", str(LIMIT),
            "--batch_size", "4",
            "--log_samples",
            "--output_path", str(out),
        ],
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]["lit_sparse_math_ppl"]
    assert math.isfinite(results["word_perplexity,none"])
    (samples_file,) = out.rglob("samples_lit_sparse_math_ppl_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == LIMIT
    # each document fits one window of 512: its log-likelihood after the end-of-text token
    model, tokenizer = lit_sparse.load_pretrained(random_export)
    for sample in samples:
        ids = tokenizer.encode(sample["doc"]["text"])
        assert len(ids) < 512
        (expected,) = lit_sparse.score(model, [(tokenizer.document_prefix, ids)])
        got = sample["filtered_resps"][0]
        got = got[0] if isinstance(got, list) else got
        assert float(got) == pytest.approx(expected.logprob, rel=1e-4)


def test_an_unknown_task_is_one_line(random_export, tmp_path):
    done = lm_eval(
        [
            "--model", "lit_sparse",
            "--model_args", f"pretrained={random_export}",
            "--tasks", "no_such_task",
            "--include_path", str(TASKS_DIR),
        ],
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: --tasks:") and "no_such_task" in last


def test_lm_evals_hf_model_on_an_export(random_export, tmp_path):
    """``--model hf`` needs the export to load in transformers (model_type, auto_map and the
    remote code: the transformers branch, issue 26)."""
    config = json.loads((random_export / "config.json").read_text())
    if "auto_map" not in config:
        pytest.skip("the export's config.json has no auto_map: it does not load in transformers")
    out = tmp_path / "hf"
    done = lm_eval(
        [
            "--model", "hf",
            "--model_args", f"pretrained={random_export},trust_remote_code=True",
            "--device", "cpu",
            "--tasks", "lit_sparse_math_ppl",
            "--include_path", str(TASKS_DIR),
            "--limit", str(LIMIT),
            "--output_path", str(out),
        ],
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]["lit_sparse_math_ppl"]
    assert math.isfinite(results["word_perplexity,none"])
