"""The FLOPs report (lit_sparse_studies/study/flops.py): dense's count within one percent of
torch's measure_flops, and the sparse count the throughput monitor's. The command:
tests/studies/commands/test_flops.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lit_sparse import LanguageModel
from lit_sparse.evaluation import flops_per_batch
from lit_sparse.parsing.config_files import read_model_config
from lit_sparse_studies.study.flops import flops_report, measured_dense_flops

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


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
