"""The datasets of the shipped lm-eval tasks (lit_sparse/interop/lm_eval_tasks/utils.py): one
``test`` split each, built from the held-out split with the columns its task file reads."""

from __future__ import annotations

from lit_sparse.evaluation.held_out_tasks import math_items
from lit_sparse.interop.lm_eval_tasks import utils


def test_each_dataset_is_one_test_split_of_the_held_out_items():
    plays = utils.shakespeare_documents()
    assert list(plays) == ["test"] and plays["test"].num_rows == 4
    assert plays["test"].column_names == ["title", "text"]
    assert utils.math_documents()["test"].num_rows == 1638
    items = math_items()
    answers = utils.math_answer()["test"]
    assert answers.column_names == ["kind", "prompt", "answer"] and answers.num_rows == len(items)
    assert answers[0] == {k: items[0][k] for k in ("kind", "prompt", "answer")}
    choices = utils.math_choice(pretrained="ignored")["test"]  # lm-eval passes metadata
    with_choice = [item for item in items if item["choice_context"] is not None]
    assert choices.num_rows == len(with_choice)
    assert choices[0]["choices"][choices[0]["label"]] == choices[0]["answer"]
