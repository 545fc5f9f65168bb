"""The shipped lm-eval tasks' items: from the held-out split only, the counts their YAMLs
state, and multiple choices that hold the answer at their label (the task files:
tests/interop/test_shipped_tasks.py)."""

from __future__ import annotations

from lit_sparse.data.embedded import read_records
from lit_sparse.evaluation.held_out_tasks import CHOICE_OFFSETS, held_out_documents, math_items


def test_documents_are_the_held_out_split_never_training_text():
    plays = held_out_documents("shakespeare")
    assert [p["title"] for p in plays] == [r["title"] for r in read_records("shakespeare", "val")]
    assert len(plays) == 4
    math = held_out_documents("math")
    assert len(math) == 1638
    training = {r["text"] for r in read_records("math", split="train")}
    assert not training & {d["text"] for d in math}


def test_math_items_hold_their_answer():
    items = math_items()
    assert len(items) == 1404
    questions = {d["text"].split("\n", 1)[0] for d in held_out_documents("math")}
    with_choice = [item for item in items if item["choice_context"] is not None]
    assert with_choice
    for item in items:
        assert item["prompt"].endswith(":") and "\n" in item["prompt"]
        assert item["prompt"].split("\n", 1)[0] in questions
    for item in with_choice:
        choices, answer = item["choices"], item["answer"]
        assert len(set(choices)) == 4 and choices[item["label"]] == answer
        assert {int(c) - int(answer) for c in choices} - {0} <= set(CHOICE_OFFSETS)
    assert math_items() == items  # the shuffles are fixed
