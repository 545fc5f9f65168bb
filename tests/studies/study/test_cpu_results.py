"""The cpu study's runs over seeds (lit_sparse_studies/study/cpu_results.py), collected from
the records committed under docs/cpu-study/results: each variant's seeds in the preset's
order, the runs without a record listed as missing, and no record at all one ConfigError."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lit_sparse import ConfigError, DamagedFileError
from lit_sparse_studies.study.cpu_results import collect
from lit_sparse_studies.study.preset import preset_runs

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "cpu-study" / "results"


def test_the_committed_records_collect_in_the_presets_order():
    study = collect(preset_runs("cpu", [0, 1], variants=["fib_fixed", "dense"]), RESULTS)
    assert [v.name for v in study.variants] == ["dense", "fib_fixed"]  # the preset's order
    assert [[run.seed for run in v.runs] for v in study.variants] == [[0, 1], [0, 1]]
    assert (study.sets, study.lengths, study.missing) == (
        ["shakespeare", "math"],
        [256, 1024, 4096],
        [],
    )
    assert study.setup["model.arch.d_model"] == 96
    dense = study.variants[0].runs[0]
    assert dense.result.ppl("shakespeare", 256) == pytest.approx(165.24, abs=0.01)
    assert dense.path == RESULTS / "dense" / "seed0.json"


def test_runs_without_a_record_are_missing_and_none_at_all_is_refused(tmp_path):
    shutil.copytree(RESULTS / "dense", tmp_path / "dense")
    study = collect(preset_runs("cpu", [0, 9], variants=["dense", "fib_fixed"]), tmp_path)
    assert [v.name for v in study.variants] == ["dense"]
    missing = sorted((run.variant.name, run.seed, state) for run, state in study.missing)
    assert missing == [
        ("dense", 9, "no record"),
        ("fib_fixed", 0, "no record"),
        ("fib_fixed", 9, "no record"),
    ]
    empty = tmp_path / "empty"
    with pytest.raises(ConfigError, match=f"no record under {empty}; run the preset first"):
        collect(preset_runs("cpu", [0], variants=["dense"]), empty)


def test_a_record_of_another_seed_is_refused(tmp_path):
    (tmp_path / "dense").mkdir()
    record = json.loads((RESULTS / "dense" / "seed1.json").read_text())
    (tmp_path / "dense" / "seed0.json").write_text(json.dumps(record))
    with pytest.raises(
        DamagedFileError, match="the record is not this path's run: seed 1 .expected 0"
    ):
        collect(preset_runs("cpu", [0], variants=["dense"]), tmp_path)
