"""``flops``: per-token forward FLOPs by term; dense agrees with Lightning's measure_flops;
the sparse count is the one the SparseThroughputMonitor uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from lit_sparse import LanguageModel
from lit_sparse.__main__ import main as lit_main
from lit_sparse.evaluation import flops_per_batch, forward_flops_per_token
from lit_sparse.parsing.config_files import read_model_config
from lit_sparse_studies.study.flops import flops_report, measured_dense_flops

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"


def main(argv):
    """``python -m lit_sparse flops ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["flops", *argv])


def number(text: str, label: str, column: int) -> int:
    line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    cells = line.strip("| ").split(" | ")  # a Markdown row: term | dense | sparse | ratio
    return int(cells[column].replace(",", ""))


def test_fixed_at_1024_prints_every_term_and_the_check(capsys):
    assert lit_main(["flops", "--model_config", str(CONFIGS / "fixed.yaml")]) == 0
    out = capsys.readouterr().out
    for label in ("attention scores", "attention mixing", "projections", "MLP", "LM head"):
        assert label in out
    spec = read_model_config([CONFIGS / "fixed.yaml"])
    dense = forward_flops_per_token(spec.arch, [1024] * 16)
    sparse = forward_flops_per_token(spec.arch, [19] * 16)
    assert number(out, "total", 1) == dense.total
    assert number(out, "total", 2) == sparse.total
    assert number(out, "attention scores", 2) == 2 * 8 * 64 * 19 * 16
    check = re.search(r"measure_flops .* = ([\d,]+) per token; ours ([\d,]+) \(([-+\d.]+) %\)", out)
    assert check and abs(float(check.group(3))) < 1.0
    assert "88,146,944" in out  # the paper's 2 x non-embedding parameters


@pytest.mark.parametrize("length", [1024, 300])
def test_dense_total_within_one_percent_of_measure_flops(length):
    spec = read_model_config([CONFIGS / "dense.yaml"])
    report = flops_report(spec, length)
    assert report.dense.total == pytest.approx(report.measured, rel=0.01)
    assert report.is_dense and report.sparse.total == report.dense.total


def test_sparse_count_is_the_throughput_monitors(tmp_path):
    """flops x 3 x tokens equals flops_per_batch of the built model (the monitor's number)."""
    spec = read_model_config([CONFIGS / "coprime.yaml", CONFIGS / "quickstart.yaml"])
    report = flops_report(spec, check=False)
    torch.manual_seed(0)
    model = LanguageModel(spec.arch, spec.attention)
    batch, length = 2, spec.seq_len
    assert flops_per_batch(model, batch, length) == round(3 * report.sparse.total * batch * length)
    assert measured_dense_flops(spec.arch, length) == pytest.approx(report.dense.total, rel=0.01)


def test_bad_length_is_one_line(capsys):
    assert (
        main(["--model_config", str(CONFIGS / "fixed.yaml"), "--length", "-3", "--no-check"]) == 2
    )
    assert capsys.readouterr().err.strip() == "error: --length=-3: expected a positive integer"
