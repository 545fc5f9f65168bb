"""The example plugin passes lit_sparse's conformance kit, and is registered by its entry
point."""

import pytest
from lit_sparse_dilated import DilatedAttention

from lit_sparse import list_attention, testing


@pytest.mark.parametrize("check", testing.CHECKS)
def test_conformance(check):
    check(DilatedAttention(window=4, dilation=5, n_dilated=12))


def test_the_entry_point_registers_it():
    assert "dilated" in list_attention()
    assert DilatedAttention.name == "dilated"
