"""The paper's tables from run folders (lit_sparse_studies/study/paper_tables.py): a run's
setup column says how it differs from the paper's, Table 1 puts the paper's row under a
matrix run's, and a folder that is not a run is one ConfigError. From trained runs, through
``matrix --table``: tests/studies/commands/test_matrix.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lit_sparse import ConfigError
from lit_sparse_studies.study.paper_matrix import PAPER_ARCH, PAPER_SETS
from lit_sparse_studies.study.paper_tables import RunRecord, _setup, read_run, table1


def test_the_setup_says_how_a_run_differs_from_the_papers():
    paper = {"model": {"arch": PAPER_ARCH}, "data": {"init_args": {"seq_len": 1024}}}
    assert _setup(paper, PAPER_SETS) == "paper"
    small = {
        "model": {"arch": {**PAPER_ARCH, "n_layers": 2, "d_model": 64}},
        "data": {"init_args": {"seq_len": 256}},
        "trainer": {"max_steps": 40},
    }
    assert _setup(small, ["tinystories"]) == "2L d64, T=256, sets tinystories, 40 steps"
    assert _setup(paper, []) == "no held-out sets"


def test_table_1_puts_the_papers_row_under_a_matrix_runs():
    ours = RunRecord(Path("runs/a"), "fib_fixed_w8", "fib_fixed_w8", "2L d64", 40)
    ours.ppl = {"tinystories": 7.123, "mine": float("nan")}
    text = table1([ours])
    assert text.startswith("Table 1: held-out perplexity per set")
    header, _, *rows = text.split("\n\n", 1)[1].splitlines()
    assert header == "| run | source | setup | step | " + " | ".join(PAPER_SETS) + " | mine |"
    assert rows == [
        "| fib_fixed_w8 | ours: runs/a | 2L d64 | 40 | - | - | 7.12 | - | - |",
        "| fib_fixed_w8 | paper | paper | 13000 | 44.08 | 40.02 | 5.55 | 3.45 | - |",
    ]


def test_a_folder_that_is_not_a_run_is_one_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no config.yaml or hparams.yaml .not a run directory"):
        read_run(tmp_path)
    with pytest.raises(ConfigError, match="RUN_DIR .*gone: no such directory"):
        read_run(tmp_path / "gone")
