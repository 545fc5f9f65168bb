"""Rebuild the recall study's committed tables from its committed records: every tables file
below (``matrix --table`` of its tasks and variants), and the progress tables that
docs/recall-study.md marks with ``<!-- name -->`` ... ``<!-- /name -->`` from their files.
The check also finds a marked table no tables file holds, and an interval (``0.458 [0.440,
0.475]``) that the README or the document quotes and no table makes.

    python docs/recall-study/refresh_tables.py           # rewrite what is stale
    python docs/recall-study/refresh_tables.py --check   # exit 1 naming what is stale

Run it after committing a record; tests/studies/study/test_recall_report.py runs the check.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from lit_sparse_studies.study.preset import preset_runs
from lit_sparse_studies.study.recall_records import record_file
from lit_sparse_studies.study.recall_report import recall_tables
from lit_sparse_studies.study.recall_results import collect_recall

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DOCUMENT = HERE.parent / "recall-study.md"
README = HERE.parents[1] / "README.md"
SEEDS = (0, 1, 2)

GENERATED = {  # a tables file: the tasks, variants (None: the preset's defaults) and seeds it holds
    "tables.md": (("mqar64", "mqar128", "distance"), None),
    "alpha-control.md": (
        ("mqar128",),
        ("fib_fixed", "fib_linear", "alphas_05_05", "alphas_15_15", "alphas_15_05"),
    ),
    "far-mqar.md": (("far_mqar",), None),
    "distance-budget.md": (("distance_budget",), None),
    "far-mqar-hybrid.md": (
        ("far_mqar",),
        ("dense", "fib_linear", "sw_keys", "hyb_fib_linear", "hyb_sw_keys", "sw_relay"),
    ),
    # the budget control, one seed; written once its record is committed
    "far-mqar-budget.md": (("far_mqar_budget",), ("fib_linear",), (0,)),
}

REFRESHED = {  # a marked table the document takes whole from a file: (file, its header starts)
    "far-mqar": ("far-mqar.md", "| setting | variant | accuracy"),
    "distance-budget": ("distance-budget.md", "| variant | steps (early stops)"),
    "far-mqar-hybrid": ("far-mqar-hybrid.md", "| setting | variant | accuracy"),
}

MARKED = re.compile(r"<!-- ([\w-]+) -->\n(.*?)<!-- /\1 -->", re.S)


def made_tables() -> dict[str, str]:
    """Every tables file's text as the committed records make it."""
    made = {}
    for name, (tasks, variants, *seeds) in GENERATED.items():
        seeds = seeds[0] if seeds else SEEDS
        runs = preset_runs("recall", seeds=seeds, tasks=tasks, variants=variants)
        if not any(_recorded(run) for run in runs):
            continue  # a study still running: no record yet, no table
        made[name] = recall_tables(collect_recall(runs, RESULTS)).strip() + "\n"
    return made


def _recorded(run) -> bool:
    return record_file(RESULTS, run.setup.name, run.variant.name, run.seed).is_file()


def _table(text: str, header: str) -> str:
    start = text.index(header)
    end = text.find("\n\n", start)
    return text[start : end if end >= 0 else len(text)].strip()


def refreshed_document(document: str, made: dict[str, str]) -> str:
    """``document`` with each REFRESHED block replaced by its file's table."""

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in REFRESHED:
            return match.group(0)
        file, header = REFRESHED[name]
        return f"<!-- {name} -->\n{_table(made[file], header)}\n<!-- /{name} -->"

    return MARKED.sub(replace, document)


def stale(made: dict[str, str] | None = None) -> list[str]:
    """What differs from the records: tables files, and marked tables of the document that no
    tables file holds."""
    made = made_tables() if made is None else made
    found = [
        f"docs/recall-study/{name}"
        for name, text in made.items()
        if not (HERE / name).is_file() or (HERE / name).read_text() != text
    ]
    document = DOCUMENT.read_text()
    for name, block in MARKED.findall(document):
        if not any(block.strip() in text for text in made.values()):
            found.append(f"docs/recall-study.md's table {name!r}")
    intervals = {i for text in made.values() for i in _intervals(text)}
    intervals |= {(-m, -high, -low) for m, low, high in intervals}  # quoted as b - a
    for path in (README, DOCUMENT):
        for mean, low, high in sorted(_intervals(path.read_text()) - intervals):
            found.append(f"{path.name}'s interval {mean:.3f} [{low:.3f}, {high:.3f}]")
    return found


# a quoted interval, its parts possibly wrapped onto the next line of the Markdown source
INTERVAL = re.compile(r"([+-]?\d\.\d{3})\s+\[([+-]?\d\.\d{3}),\s+([+-]?\d\.\d{3})\]")


def _intervals(text: str) -> set[tuple[float, float, float]]:
    """Every ``0.458 [0.440, 0.475]`` of a text, as numbers (so -0.000 is 0.000)."""
    return {tuple(round(float(v), 3) + 0.0 for v in m) for m in INTERVAL.findall(text)}


def main(argv: list[str]) -> int:
    made = made_tables()
    if "--check" in argv:
        found = stale(made)
        print("stale: " + "; ".join(found) if found else "every table is the records'")
        return 1 if found else 0
    for name, text in made.items():
        (HERE / name).write_text(text)
    DOCUMENT.write_text(refreshed_document(DOCUMENT.read_text(), made))
    left = stale(made)
    print("rewritten; still stale (copy by hand): " + "; ".join(left) if left else "rewritten")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
