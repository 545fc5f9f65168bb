"""The recall study's runs over seeds (lit_sparse_studies/study/recall_results.py), collected
from the records committed under docs/recall-study/results: a variant's decoding cache over
seeds. Its tables: tests/studies/study/test_recall_report.py."""

from __future__ import annotations

from pathlib import Path

from lit_sparse_studies.study.preset import preset_runs
from lit_sparse_studies.study.recall_results import collect_recall

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "recall-study" / "results"


def test_a_learned_cache_is_the_largest_over_seeds():
    """A learned alpha's cache differs from seed to seed: the variant's is the largest, not
    seed 0's."""
    runs = preset_runs("recall", seeds=(0, 1, 2), tasks=("far_mqar",), variants=("fib_learned",))
    variant = collect_recall(runs, RESULTS).task("far_mqar").variant("fib_learned")
    per_seed = [max(r.result.offer["use"][256]["cache_rows"]) for r in variant.runs]
    assert per_seed == [243, 253, 239]
    assert variant.offer(256) == (24.0, 253)
