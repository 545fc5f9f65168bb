"""The recall study's records (``DIR/<task>/<variant>/seed<K>.json``) are checked before a
table counts them (issue 47): against their path, against each other and for the values they
hold; each refusal is one line naming the file and the field. Checked on copies of the
committed records (docs/recall-study/results), so nothing is trained."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from lit_sparse.__main__ import main as lit_main

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "docs" / "recall-study" / "results"
VARIANTS = ("dense", "fib_linear", "sw_keys", "bigbird")


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


@pytest.fixture
def records(tmp_path) -> Path:
    """A copy of the committed mqar128 records of four variants, seeds 0-2."""
    out = tmp_path / "results"
    for variant in VARIANTS:
        shutil.copytree(COMMITTED / "mqar128" / variant, out / "mqar128" / variant)
    return out


def table(records: Path, capsys, variants=VARIANTS) -> tuple[int, str, str]:
    args = ["matrix", "--preset", "recall", "--seeds", "0", "1", "2", "--tasks", "mqar128"]
    args += ["--variants", *variants, "--table", "--results", str(records)]
    code = lit_main([*args, "--root", str(records.parent / "no-runs")])
    out, err = capsys.readouterr()
    return code, out, err


def edit(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_the_copied_records_make_a_table(records, capsys):
    code, out, err = table(records, capsys)
    assert code == 0, err
    assert "Seeds per variant, mqar128: dense 3, fib_linear 3, bigbird 3, sw_keys 3." in out


# ----------------------------------------------------------- a record in the wrong folder
def _relabel(record, field, value):
    record[field] = value


@pytest.mark.parametrize(
    ("source", "change", "field"),
    [
        # the cp (fib_linear 0.458 -> 0.636): the same results as dense/seed0.json
        ("dense/seed0.json", None, "dense/seed0.json"),
        ("dense/seed0.json", lambda r: _relabel(r, "variant", "fib_linear"), "options"),
        (
            "dense/seed0.json",
            lambda r: (_relabel(r, "variant", "fib_linear"), r.pop("options")),
            "attention",
        ),
        ("fib_linear/seed1.json", None, "seed"),
        ("fib_linear/seed1.json", lambda r: _relabel(r, "seed", 0), "options"),
        (
            "fib_linear/seed1.json",
            lambda r: (_relabel(r, "seed", 0), r.pop("options")),
            "fib_linear/seed1.json",
        ),
    ],
)
def test_a_record_in_another_folder_is_refused_naming_the_field(
    records, capsys, source, change, field
):
    """Issue 47: a copy of another variant's (or seed's) record under fib_linear/seed0.json
    counted for fib linear. Its own variant, task and seed, the options that started it and its
    attention are checked against the path; a copy left as it is (the first case) or with its
    seed and options gone (the last) is a duplicate of the file it copies."""
    target = records / "mqar128" / "fib_linear" / "seed0.json"
    shutil.copy(records / "mqar128" / source, target)
    if change is not None:
        edit(target, change)
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and str(target) in line
    if field.endswith(".json"):  # a copy: a duplicate of the file it copies
        assert "a duplicate of " in line and str(records / "mqar128" / field) in line
    else:
        assert f"{field} " in line or f"{field}." in line or f"{field}:" in line, line


def test_a_record_of_another_task_is_refused(records, capsys):
    target = records / "mqar128" / "dense" / "seed2.json"
    shutil.copy(COMMITTED / "mqar64" / "dense" / "seed2.json", target)
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and str(target) in line and "task 'mqar64'" in line


def test_a_sliding_window_record_at_the_other_window_is_refused(records, capsys):
    """sw_keys and sw_cache share a config and differ in their window at the task's length:
    a sw_cache record relabelled sw_keys (its options gone, as an older record's) is refused
    by its attention's window."""
    target = records / "mqar128" / "sw_keys" / "seed1.json"
    shutil.copy(COMMITTED / "mqar128" / "sw_cache" / "seed1.json", target)
    edit(target, lambda r: (_relabel(r, "variant", "sw_keys"), r.pop("options")))
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and str(target) in line and "attention.init_args.window" in line


# ----------------------------------------------------------------- a duplicated seed
def test_a_copy_of_a_seed_is_refused_naming_both_files(records, capsys):
    """Issue 47: a copy of seed0.json as seed1.json was accepted as 3 seeds."""
    folder = records / "mqar128" / "dense"
    shutil.copy(folder / "seed0.json", folder / "seed1.json")
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and "duplicate" in line
    assert str(folder / "seed1.json") in line and str(folder / "seed0.json") in line


def test_a_record_whose_task_names_another_task_is_not_called_a_duplicate(records, capsys):
    """Issue 57 (minor): mqar64's record with its task edited to mqar128 was refused as "a
    duplicate" of mqar128's record of that seed; it is a record out of its place."""
    shutil.copytree(COMMITTED / "mqar64" / "dense", records / "mqar64" / "dense")
    target = records / "mqar64" / "dense" / "seed1.json"
    edit(target, lambda record: record.update(task="mqar128"))
    args = ["matrix", "--preset", "recall", "--seeds", "0", "1", "2", "--tasks", "mqar128"]
    args += ["mqar64", "--variants", "dense", "--table", "--results", str(records)]
    code = lit_main([*args, "--root", str(records.parent / "no-runs")])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and str(target) in line and "duplicate" not in line
    assert "its task 'mqar128' is not the 'mqar64' of its place (mqar64/dense/seed1)" in line


def test_a_copy_of_one_seed_as_another_is_refused_naming_both(records, capsys):
    """Issue 47: seed0.json copied as seed1.json counted as 3 seeds; relabelled to seed 1
    throughout (its seed, options and BigBird's attention seed), it is still the same run."""
    folder = records / "mqar128" / "bigbird"

    def relabel(record):
        record["seed"] = 1
        record["options"] = [o if o != "0" else "1" for o in record["options"]]
        record["attention"]["init_args"]["seed"] = 1

    shutil.copy(folder / "seed0.json", folder / "seed1.json")
    edit(folder / "seed1.json", relabel)
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and "duplicate" in line
    assert str(folder / "seed1.json") in line and str(folder / "seed0.json") in line


# ------------------------------------------------------------------------ bad values
@pytest.mark.parametrize(
    ("value", "shown"),
    [(float("nan"), "nan"), (float("inf"), "inf"), (1.5, "1.5"), (-0.1, "-0.1"), ("0.9", "'0.9'")],
)
def test_an_accuracy_that_is_no_share_is_refused(records, capsys, value, shown):
    """Issue 47: a NaN accuracy was dropped from the mean while 3 seeds were claimed, 1.5 was
    averaged in, and the string "0.9" coerced."""
    target = records / "mqar128" / "fib_linear" / "seed2.json"

    def bad(record):
        record["recall"]["scores"]["use"]["128"]["L128_kv8"]["accuracy"] = value

    edit(target, bad)
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and str(target) in line
    assert "recall.scores.use.128.L128_kv8.accuracy" in line and shown in line


def test_an_unscored_set_is_no_bad_value(records, capsys):
    """None is what an evaluation writes for a set with no examples: not a bad value."""
    target = records / "mqar128" / "dense" / "seed2.json"

    def unscored(record):
        cell = record["recall"]["scores"]["drop"]["128"]["L128_kv8"]
        cell.update(accuracy=None, exact=None, examples=0)

    edit(target, unscored)
    assert table(records, capsys)[0] == 0


@pytest.mark.parametrize("key", ["accuracy", "exact"])
def test_a_scored_set_with_no_accuracy_is_refused(records, capsys, key):
    """Issue 57 (SW1): a null accuracy in a set scored on 50 examples dropped the seed, made
    the intervals [nan, nan] and flipped claim rows to "no": a nan interval is no verdict."""
    target = records / "mqar128" / "fib_linear" / "seed2.json"

    def null(record):
        record["recall"]["scores"]["use"]["128"]["L128_kv8"][key] = None

    edit(target, null)
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and str(target) in line
    assert f"recall.scores.use.128.L128_kv8.{key} is None" in line and "examples" in line


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ((), "recall.scores is a list"),
        (("use",), "recall.scores.use is a list"),
        (("use", "128", "L128_kv8"), "recall.scores.use.128.L128_kv8 is a list"),
    ],
)
def test_scores_or_a_cell_that_is_a_list_are_refused(records, capsys, where, field):
    """Issue 57 (TB1, TB2): a record whose scores, or one score cell, is a list raised a bare
    AttributeError."""
    target = records / "mqar128" / "dense" / "seed1.json"

    def listed(record):
        parent = record["recall"]
        for key in ("scores", *where)[:-1]:
            parent = parent[key]
        last = ("scores", *where)[-1]
        parent[last] = list(parent[last].values())

    edit(target, listed)
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and str(target) in line and field in line


@pytest.mark.parametrize("value", ["no", "false", 1, 0])
def test_a_stopped_early_that_is_no_boolean_is_refused(records, capsys, value):
    """Issue 57 (SW4): ``stopped_early: "no"`` counted as an early stop; only the boolean
    true is one, any other value that is no boolean is refused naming the file."""
    target = records / "mqar128" / "dense" / "seed0.json"
    edit(target, lambda record: record.update(stopped_early=value))
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and str(target) in line and f"stopped_early is {value!r}" in line


# -------------------------------------------------------------- options of a smoke test
def test_records_of_one_task_trained_with_other_options_are_refused(records, capsys):
    """Issue 47: a smoke test's records (other fit options) among the study's are refused,
    naming the file and its options."""
    target = records / "mqar128" / "dense" / "seed1.json"

    def smoke(record):
        options = record["options"]
        at = options.index("--seed_everything")  # after the configs and the task's options
        options[at:at] = ["--trainer.val_check_interval", "4"]

    edit(target, smoke)
    code, _, err = table(records, capsys)
    line = one_error(err)
    assert code == 2 and str(target) in line and "--trainer.val_check_interval 4" in line


def test_a_table_of_runs_trained_with_extra_options_says_so(records, capsys):
    """Every record of the study trained with the same extra options: the table is built, and
    a note says its runs are not the preset's own setup."""

    def smoke(record):
        options = record["options"]
        at = options.index("--seed_everything")  # after the configs and the task's options
        options[at:at] = ["--trainer.val_check_interval", "4"]

    for path in records.rglob("seed*.json"):
        edit(path, smoke)
    code, out, err = table(records, capsys)
    assert code == 0 and "Seeds per variant" in out
    assert "mqar128" in err and "--trainer.val_check_interval 4" in err
    assert "not the preset's own" in err
