"""The datasets of lit_sparse's lm-eval tasks, built from the installed package's held-out split
(no download, never training text). lm-eval imports this file from the task folder."""

from __future__ import annotations

import datasets

from lit_sparse.evaluation.held_out_tasks import held_out_documents, math_items


def _test_split(rows: list[dict]) -> datasets.DatasetDict:
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def shakespeare_documents(**metadata) -> datasets.DatasetDict:
    """The four held-out plays, whole."""
    return _test_split(held_out_documents("shakespeare"))


def math_documents(**metadata) -> datasets.DatasetDict:
    """The held-out math problems, each a document (question and worked solution)."""
    return _test_split(held_out_documents("math"))


def math_choice(**metadata) -> datasets.DatasetDict:
    """The worked solution's last step: the answer against three nearby numbers."""
    return _test_split([item for item in math_items() if item["choice_context"] is not None])


def math_answer(**metadata) -> datasets.DatasetDict:
    """The question and the answer label; the answer is the final number generated."""
    rows = [{k: item[k] for k in ("kind", "prompt", "answer")} for item in math_items()]
    return _test_split(rows)
