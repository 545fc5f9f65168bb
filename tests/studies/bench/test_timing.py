"""The bench's timing helpers (lit_sparse_studies/bench/timing.py): busy cores spin only
inside their block."""

from __future__ import annotations

from lit_sparse_studies.bench.timing import busy_cores


def test_busy_cores_spin_only_inside_the_block():
    with busy_cores(2) as spinners:
        assert len(spinners) == 2 and all(s.poll() is None for s in spinners)
    assert all(s.poll() is not None for s in spinners)
