"""The cpu study's tables (lit_sparse_studies/study/cpu_report.py) from the records committed
under docs/cpu-study/results: a comparison behind a paper claim marked beyond the seed
spread, each variant's rows as docs/cpu-study.md shows them, and the sections in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from lit_sparse_studies.study.cpu_report import comparisons, study_tables
from lit_sparse_studies.study.cpu_results import collect
from lit_sparse_studies.study.preset import preset_runs

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def study():
    """dense and fib_fixed, seeds 0 to 2, as committed."""
    runs = preset_runs("cpu", [0, 1, 2], variants=["dense", "fib_fixed"])
    return collect(runs, ROOT / "docs" / "cpu-study" / "results")


def test_dense_degrading_beyond_its_length_is_beyond_the_seed_spread(study):
    claim = "dense degrades beyond its training length, sparse stays flat"
    assert comparisons(study) == [
        [claim, "dense - fib_fixed", "change at 16x (4096) %", "shakespeare"]
        + ["+35.5 ± 3.0", "+0.4 ± 1.4", "+35.2", "4.4", "yes"],
        [claim, "dense - fib_fixed", "change at 16x (4096) %", "math"]
        + ["+261.7 ± 35.5", "-0.9 ± 0.6", "+262.6", "36.0", "yes"],
    ]  # the other claims compare variants not collected here


def test_each_variants_rows_are_the_committed_pages(study):
    text = study_tables(study)
    page = (ROOT / "docs" / "cpu-study.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith(("| dense |", "| fib_fixed |"))]
    assert len(rows) == 2 * 2 * 2 + 2  # ppl and bins: 2 variants x 2 sets; the paper table: 2
    assert "| dense | shakespeare | 3 | 162.69 ± 2.39 | 186.32 ± 4.15 | 220.53 ± 7.95 |" in text
    assert [row for row in rows if row not in page] == []
    sections = [line for line in text.splitlines() if line.startswith("#")]
    assert sections[0] == "# The cpu preset over seeds"
    assert [s.lstrip("# ") for s in sections[1:3]] == [
        "Perplexity against evaluation length",
        "Comparisons behind the paper's claims",
    ]
