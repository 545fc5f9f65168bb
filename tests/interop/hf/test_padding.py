"""Padded batches each row as if alone (lit_sparse/interop/hf/padding.py): a mask's layout,
each broken mask one line, position ids checked against the only placement the models
compute, and left-padded rows run from position 0 in groups."""

from __future__ import annotations

import re

import pytest
import torch

from lit_sparse.errors import ConfigError
from lit_sparse.interop.hf.padding import check_positions, padded_forward, row_layout


def mask(*rows: str) -> torch.Tensor:
    return torch.tensor([[int(c) for c in row] for row in rows])


def test_the_layout_of_left_and_right_padded_rows():
    layout = row_layout(mask("0011", "1110", "0011", "1111"), 4, 4)
    assert layout.left.tolist() == [2, 0, 2, 0] and layout.length.tolist() == [2, 3, 2, 4]
    assert layout.left_padded and layout.right_padded
    assert [(left, rows.tolist()) for left, rows in layout.groups()] == [(2, [0, 2]), (0, [1, 3])]
    plain = row_layout(None, 2, 5)
    assert plain.length.tolist() == [5, 5] and not plain.left_padded and not plain.right_padded


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (("0110", "0000"), "attention_mask: row 1 has no token (every entry is 0)"),
        (("1011", "1111"), "attention_mask: row 0 has padding between its tokens; "),
    ],
)
def test_a_broken_mask_is_one_line_naming_the_row(rows, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        row_layout(mask(*rows), 2, 4)


def test_a_mask_of_another_shape_names_both_shapes():
    with pytest.raises(ConfigError, match=r"shape \(2, 4\) .*, got shape \(2, 3\)$"):
        row_layout(mask("111", "111"), 2, 4)


def test_positions_must_number_each_rows_tokens_from_0():
    layout = row_layout(mask("0011", "1111"), 2, 4)
    check_positions(None, layout, 0)
    check_positions(torch.tensor([[9, 9, 0, 1], [0, 1, 2, 3]]), layout, 0)  # pads: anything
    check_positions(torch.tensor([[1], [3]]), layout, 3)  # a decoding step at column 3
    with pytest.raises(ConfigError, match="^position_ids: lit_sparse models place each row"):
        check_positions(torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]]), layout, 0)
    with pytest.raises(ConfigError, match=r"^position_ids: expected shape \(batch, length\)"):
        check_positions(torch.tensor([0, 1, 2, 3]), layout, 0)
    unpadded = row_layout(None, 2, 4)
    check_positions(torch.tensor([[0, 1, 2, 3]]), unpadded, 0)  # one row for the batch
    with pytest.raises(ConfigError, match="^position_ids: lit_sparse models place"):
        check_positions(torch.tensor([[1, 2, 3, 4]]), unpadded, 0)


def positional(ids: torch.Tensor) -> torch.Tensor:
    """A causal stand-in network whose output depends on each token's position: (B, n, 2)."""
    position = torch.arange(ids.shape[1], dtype=torch.float)
    running = ids.float().cumsum(1)
    return torch.stack([running, running * 10 + position], dim=-1)


def test_left_padded_rows_run_from_position_0_as_if_alone():
    ids = torch.tensor([[0, 0, 5, 6], [1, 2, 3, 4], [0, 0, 7, 8]])
    layout = row_layout(mask("0011", "1111", "0011"), 3, 4)
    logits = padded_forward(positional, ids, layout)
    for row, left in ((0, 2), (1, 0), (2, 2)):
        alone = positional(ids[row : row + 1, left:])[0]
        assert torch.equal(logits[row, left:], alone)
    assert torch.equal(logits[0, :2], torch.zeros(2, 2))  # pad columns: zeros
    right = row_layout(mask("1100", "1111"), 2, 4)
    assert torch.equal(padded_forward(positional, ids[:2], right), positional(ids[:2]))
