"""Slots as a dense mask through SDPA, where that is the cheaper op: on the CPU, for slots
that cover a large share of the causal past (a wide window) and have no interpolated rungs
(a mask cannot blend two rows).

The slot op's time grows with the keys a query reads, the masked product's with the length.
Measured on one core of the 2-core Xeon, forward + backward, fp32 (docs/performance.md,
"Wide slot sets"): they cost the same at 1/4-1/2 of the length (later with grouped heads,
whose key rows the slot op shares), so from half the length the masked product runs. Its
mask is (T, T): past ``MASKED_MAX_LENGTH`` the slot op runs whatever the share."""

from __future__ import annotations

from torch import Tensor

from lit_sparse.kernels.slots import KeySlots

MASKED_SHARE = 1 / 2
"""Keys a query reads, over the length, from which the masked product runs."""
MASKED_MAX_LENGTH = 8192
"""Longest length at which it may (a boolean mask of 64 MiB)."""


def masked_is_cheaper(q: Tensor, slots: KeySlots) -> bool:
    """Whether SDPA with the slots' mask beats the slot op for q (B, H, T, D)."""
    length = q.shape[-2]
    return (
        q.device.type == "cpu"
        and slots.n_rungs == 0
        and length <= MASKED_MAX_LENGTH
        and slots.keys_per_query >= MASKED_SHARE * length
    )
