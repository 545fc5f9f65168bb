"""A model and its tokenizer from a run (lit_sparse.interop.loading): a run trained on a
synthetic task says so, and ``generate`` does not decode its ids as text without a word
(issue 57, minor)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from lit_sparse.__main__ import main as lit_main
from lit_sparse.interop import loading


@pytest.mark.parametrize(
    ("data", "task"),
    [
        ({"class_path": "lit_sparse.tasks.mqar.MQARDataModule"}, "mqar"),
        ({"class_path": "mqar"}, "mqar"),
        ({"class_path": "lit_sparse_copy.segment_copy.SegmentCopyDataModule"}, "segment_copy"),
        ({"class_path": "lit_sparse.data.TextDataModule"}, None),
        (None, None),
    ],
)
def test_the_synthetic_task_of_a_run_config(data, task):
    assert loading.synthetic_task({"data": data}) == task


def test_generate_refuses_to_decode_a_synthetic_runs_ids_as_text(monkeypatch, capsys):
    """Without --tokenizer, one line naming the task; with one, it is used on purpose."""
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])
    used = []

    def source(path, tokenizer, option):
        used.append(tokenizer)
        return loading.ModelSource(SimpleNamespace(), SimpleNamespace(), "run", task="mqar")

    monkeypatch.setattr(loading, "load_source", source)
    assert lit_main(["generate", "runs/mqar/version_0", "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "error: path='runs/mqar/version_0': a run of the synthetic task 'mqar': its tokens are "
        "the task's ids, not text"
    )
    assert "--tokenizer" in err and used == [None]
