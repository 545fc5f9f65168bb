"""A cpu-study run's record (lit_sparse_studies/study/cpu_records.py): where it is filed, and
a file that is not a record, an unfinished run and a record under another run's path each one
DamagedFileError naming the file. Records written and read by ``matrix --preset cpu``:
tests/studies/commands/test_matrix_preset.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from lit_sparse import DamagedFileError
from lit_sparse_studies.study.cpu_records import (
    FORMAT,
    check_labels,
    make_record,
    read_record,
    record_file,
)


def test_a_record_is_filed_by_variant_and_seed_and_read_back(tmp_path):
    path = record_file(tmp_path, "fib_fixed", 2)
    assert path == tmp_path / "fib_fixed" / "seed2.json"
    path.parent.mkdir()
    record = {"format": FORMAT, "variant": "fib_fixed", "seed": 2}
    path.write_text(json.dumps({**record, "extrapolation": {}, "position_loss": {}}))
    assert read_record(path) == {**record, "extrapolation": {}, "position_loss": {}}
    run = SimpleNamespace(variant=SimpleNamespace(name="fib_fixed"), seed=2)
    check_labels(run, read_record(path), path)  # this path's run: no error


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"format": "x"}, "not a cpu-study run record: {path}: format='x', expected"),
        (
            {"format": FORMAT, "extrapolation": {}, "position_loss": []},
            "{path}: its position_loss is []; expected a mapping",
        ),
    ],
)
def test_a_file_that_is_not_a_record_is_one_error_naming_it(tmp_path, record, message):
    path = tmp_path / "seed0.json"
    path.write_text(json.dumps(record))
    with pytest.raises(DamagedFileError) as caught:
        read_record(path)
    assert str(caught.value).startswith(message.format(path=path))


def test_an_unfinished_run_and_another_runs_record_are_refused(tmp_path):
    with pytest.raises(DamagedFileError, match="no extrapolation.json or position_loss.json"):
        make_record(tmp_path, {"variant": "dense", "seed": 0})
    run = SimpleNamespace(variant=SimpleNamespace(name="dense"), seed=1)
    path = Path("dense/seed1.json")
    with pytest.raises(DamagedFileError) as caught:
        check_labels(run, {"variant": "fib_fixed", "seed": 0}, path)
    assert str(caught.value) == (
        "dense/seed1.json: the record is not this path's run: variant 'fib_fixed' (expected "
        "'dense'), seed 0 (expected 1)"
    )
