"""``matrix``: the paper's 22 runs, launching one, and Tables 1, 3 and 4 from run directories."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from lit_sparse.__main__ import main as lit_main
from lit_sparse_studies.study.paper_tables import read_run

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "configs" / "quickstart.yaml"
TINY = ROOT / "tests" / "configs" / "tiny.yaml"


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    """LightningCLI warns when it sees pytest's own arguments in sys.argv."""
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


def table_rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith(("| run ", "| name "))
    ]


def test_list_prints_the_21_sparse_runs_and_dense(capsys):
    assert lit_main(["matrix", "--list"]) == 0
    rows = table_rows(capsys.readouterr().out)
    names = [row[0] for row in rows]
    assert len(names) == 22 and len(set(names)) == 22
    assert names[-1] == "dense" and "pow2_fixed_w8" in names
    for family in ("fib_fixed", "fib_learned", "fib_linear", "fib_coprime", "pow2_linear"):
        assert [n for n in names if n.startswith(family + "_w")] == [
            f"{family}_w{w}" for w in (6, 8, 10, 12)
        ]
    by_name = {row[0]: row for row in rows}
    assert by_name["fib_coprime_w10"][1] == "configs/coprime.yaml"
    assert "--model.attention.init_args.window 10" in by_name["fib_coprime_w10"][2]


def test_unknown_run_names_the_allowed_ones(capsys):
    assert lit_main(["matrix", "--run", "fib_linear_w7"]) == 2
    err = capsys.readouterr().err
    assert "--run fib_linear_w7: not a run of the matrix" in err and "fib_linear_w8" in err


@pytest.fixture(scope="module")
def two_quickstart_runs(tmp_path_factory) -> list[Path]:
    """fib fixed W8 and fib linear W8, launched by ``matrix --run`` with the quickstart
    config (shrunk further by the tests' tiny overlay)."""
    from lit_sparse_studies.study import runner

    root = tmp_path_factory.mktemp("matrix")
    dirs = []
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setattr(sys, "argv", ["lit_sparse"])
        # each fit through the same CLI in this process: what --run launches is checked
        # here, its process of its own in test_matrix_preset.py (a crash, a kill, a claim)
        # and test_recall_preset.py; here it would only add two interpreter and Lightning
        # start-ups (9 s of CPU each)
        patch.setattr(runner, "fit_in_subprocess", lambda args: lit_main(list(args)))
        for name in ("fib_fixed_w8", "fib_linear_w8"):
            extra = ["--fit_config", str(QUICKSTART), str(TINY)]
            assert lit_main(["matrix", "--run", name, *extra]) == 0
            dirs.append(root / "runs" / name / "version_0")
    return dirs


def test_run_launches_fit_with_the_runs_window_and_name(two_quickstart_runs):
    import yaml

    for run_dir, schedule in zip(two_quickstart_runs, ("fixed", "linear"), strict=True):
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        attention = config["model"]["attention"]["init_args"]
        assert attention["window"] == 8
        assert attention["schedule"]["class_path"].lower().endswith(schedule)
        assert (run_dir / "extrapolation.json").is_file()
        assert (run_dir / "position_loss.json").is_file()


def test_table_rebuilds_tables_1_3_and_4_beside_the_paper(two_quickstart_runs, capsys, tmp_path):
    out_file = tmp_path / "tables.md"
    args = ["matrix", "--table", *map(str, two_quickstart_runs), "--out", str(out_file)]
    assert lit_main(args) == 0
    text = capsys.readouterr().out
    assert out_file.read_text() == text
    table1, table3, table4 = re.split(r"\n\n(?=Table \d)", text.strip())
    assert table1.startswith("Table 1") and table3.startswith("Table 3")
    assert table4.startswith("Table 4")

    records = [read_run(d) for d in two_quickstart_runs]
    assert [r.matrix_name for r in records] == ["fib_fixed_w8", "fib_linear_w8"]
    assert all(r.setup != "paper" for r in records)  # tiny shape, not comparable

    rows1 = table_rows(table1)
    ours = [r for r in rows1 if r[1].startswith("ours")]
    paper = [r for r in rows1 if r[1] == "paper"]
    assert [r[0] for r in ours] == ["fib_fixed_w8", "fib_linear_w8"]
    assert [r[0] for r in paper] == ["fib_fixed_w8", "fib_linear_w8"]
    assert paper[0][4:8] == ["44.08", "40.02", "5.55", "3.45"]  # docs/paper.md section 6
    header = table1.splitlines()[2]
    for record, row in zip(records, ours, strict=True):
        for name, value in record.ppl.items():
            column = [c.strip() for c in header.strip("|").split("|")].index(name)
            assert float(row[column]) == pytest.approx(value, abs=0.006)

    rows3 = table_rows(table3)
    ours3 = [r for r in rows3 if r[0] == "fib_fixed_w8" and r[1].startswith("ours")]
    assert {r[3] for r in ours3} == set(records[0].extrapolation.sets)
    assert all(r[4] == "48/96/192" for r in ours3)
    paper3 = [r for r in rows3 if r[1] == "paper"]
    assert [r[0] for r in paper3] == ["fib_fixed_w8"]  # the paper has no linear W8 row
    assert paper3[0][5] == "44.08 / 43.74 / 43.56"

    rows4 = table_rows(table4)
    ours4 = [r for r in rows4 if r[1].startswith("ours: ")]
    assert {r[0] for r in ours4} == {"fib_fixed_w8", "fib_linear_w8"}
    position = json.loads((two_quickstart_runs[1] / "position_loss.json").read_text())
    linear = next(r for r in ours4 if r[0] == "fib_linear_w8")
    values = position["sets"][linear[3]]
    assert [float(c) for c in linear[4 : 4 + len(values)]] == pytest.approx(values, abs=6e-4)
    gaps = [r for r in table_rows(table4) if " - " in r[0]]
    assert any(r[0] == "fib_linear_w8 - fib_fixed_w8" and r[1] == "paper" for r in gaps)
    assert any(r[0] == "fib_linear_w8 - fib_fixed_w8" and r[1] == "ours" for r in gaps)


def test_table_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert lit_main(["matrix", "--table", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
