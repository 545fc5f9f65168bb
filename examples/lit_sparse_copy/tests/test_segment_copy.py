"""The example task passes lit_sparse's task kit, and is registered by its entry point."""

import pytest
import torch
from lit_sparse_copy import SegmentCopyDataModule, segment_copy

from lit_sparse.tasks import IGNORE_INDEX, get_task, list_tasks
from lit_sparse.testing.tasks import TASK_CHECKS


@pytest.mark.parametrize("check", TASK_CHECKS, ids=lambda c: c.__name__)
def test_conformance(check):
    check(SegmentCopyDataModule(**SegmentCopyDataModule.kit_options()))


def test_the_entry_point_registers_it():
    assert "segment_copy" in list_tasks("synthetic")
    assert get_task("segment_copy") is SegmentCopyDataModule


def test_the_labels_ask_for_the_copy_of_the_segment():
    x, y = segment_copy(4, 40, 5, 50, (0,))
    assert (y != IGNORE_INDEX).sum(-1).tolist() == [4] * 4
    assert torch.equal(y[:, 35:39], x[:, 36:40])  # each next token of the copy
    for row in x.tolist():  # the copy was seen earlier, whole
        copy = row[35:]
        assert any(row[i : i + 5] == copy for i in range(30))
