"""Padded batches, each row as if alone: right padding is harmless (attention is causal); left
padding would shift positions, so rows sharing a left padding run together from position 0."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from lit_sparse.errors import ConfigError


@dataclass(frozen=True)
class RowLayout:
    """The padding of a batch of rows: ``left`` pad columns, ``length`` tokens, the rest pads."""

    left: Tensor
    """(B,) int64."""
    length: Tensor
    """(B,) int64."""
    columns: int
    left_padded: bool = field(init=False)
    right_padded: bool = field(init=False)

    def __post_init__(self):  # once, not per decoding step
        object.__setattr__(self, "left_padded", bool((self.left > 0).any()))
        right = bool((self.left + self.length < self.columns).any())
        object.__setattr__(self, "right_padded", right)

    def groups(self) -> list[tuple[int, Tensor]]:
        """(left padding, row indices) of the rows that share it, by first row."""
        lefts = self.left.tolist()
        rows = {left: [i for i, v in enumerate(lefts) if v == left] for left in lefts}
        return [(left, torch.tensor(indices)) for left, indices in rows.items()]


def row_layout(mask: Tensor | None, batch: int, columns: int) -> RowLayout:
    """The layout of a (B, columns) ``attention_mask`` (None: no padding); refuses a broken row."""
    if mask is None:
        zeros = torch.zeros(batch, dtype=torch.long)
        return RowLayout(zeros, torch.full((batch,), columns, dtype=torch.long), columns)
    if mask.dim() != 2 or tuple(mask.shape) != (batch, columns):
        raise ConfigError(
            f"attention_mask: expected a (batch, length) mask of shape {(batch, columns)} "
            f"(1 for tokens, 0 for padding), got shape {tuple(mask.shape)}"
        )
    tokens = mask.detach().cpu() != 0
    length = tokens.sum(dim=1)
    left = tokens.int().argmax(dim=1)
    right = columns - 1 - tokens.flip(1).int().argmax(dim=1)
    empty = (length == 0).nonzero().flatten().tolist()
    if empty:
        raise ConfigError(f"attention_mask: row {empty[0]} has no token (every entry is 0)")
    holes = (right - left + 1 != length).nonzero().flatten().tolist()
    if holes:
        raise ConfigError(
            f"attention_mask: row {holes[0]} has padding between its tokens; lit_sparse models "
            "take left or right padding (pad columns before or after each row's tokens)"
        )
    return RowLayout(left.long(), length.long(), columns)


def check_positions(position_ids: Tensor | None, layout: RowLayout, start: int) -> None:
    """``position_ids`` (B or 1, n) of columns ``start ..`` must number each row's tokens 0, 1, 2,
    ... from its first (pad columns may hold anything): the only placement the models compute."""
    if position_ids is None:
        return
    batch = layout.left.numel()
    n = position_ids.shape[-1]
    if not layout.left_padded and not layout.right_padded and position_ids.dim() == 2:
        # the common case, cheaply: every row at start, start + 1, ...
        expected = torch.arange(start, start + n, device=position_ids.device)
        if position_ids.shape[0] in (1, batch) and bool((position_ids == expected).all()):
            return
    columns = torch.arange(start, start + n)
    expected = columns[None] - layout.left[:, None]  # (B, n)
    real = (expected >= 0) & (columns[None] < (layout.left + layout.length)[:, None])
    given = position_ids.detach().cpu().long()
    if given.dim() != 2 or given.shape[0] not in (1, batch):
        raise ConfigError(
            f"position_ids: expected shape (batch, length), got {tuple(position_ids.shape)}"
        )
    if not bool(((given == expected) | ~real).all()):
        raise ConfigError(
            "position_ids: lit_sparse models place each row's tokens at positions 0, 1, 2, ... "
            "from its first token (after any left padding); other positions (packed "
            "sequences, offsets) are not supported: leave position_ids out"
        )


def padded_forward(network, input_ids: Tensor, layout: RowLayout) -> Tensor:
    """Logits (B, n, V) of a padded batch: one forward per group of rows sharing a left padding."""
    if not layout.left_padded:
        return network(input_ids)
    batch, columns = input_ids.shape
    logits = None
    for left, rows in layout.groups():
        part = network(input_ids[rows.to(input_ids.device), left:])  # (rows, n - left, V)
        if logits is None:
            logits = part.new_zeros(batch, columns, part.shape[-1])
        logits[rows.to(part.device), left:] = part
    return logits
