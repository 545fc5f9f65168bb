"""Rung bases, schedules and distance sets against hand-written values (docs/paper.md section 4)."""

import math

import pytest

from lit_sparse.attention import offsets
from lit_sparse.attention.schedules import Coprime, Custom, Fixed, Learned, Linear, to_schedule

FIB15 = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987]
COPRIME_SLOTS_L16 = [0, 7, 14, 5, 12, 3, 10, 1, 8, 15, 6, 13, 4, 11, 2, 9]


def test_fibonacci_rungs():
    assert offsets.fibonacci_rungs(15) == FIB15
    assert offsets.fibonacci_rungs(0) == []


def test_pow2_rungs_are_reach_matched():
    assert offsets.pow2_rungs(1024) == [2**i for i in range(10)]  # 1..512
    assert offsets.pow2_rungs(4096) == [2**i for i in range(12)]  # adds 1024, 2048
    assert offsets.pow2_rungs(1) == []


@pytest.mark.parametrize(("n_layers", "stride"), [(16, 7), (8, 3), (12, 5), (2, 1), (1, 1)])
def test_coprime_stride(n_layers, stride):
    assert offsets.coprime_stride(n_layers) == stride


def test_linear_schedule_matches_paper():
    alphas = Linear().layer_alphas(16)
    assert alphas == pytest.approx([0.5 + layer / 15 for layer in range(16)])


def test_coprime_schedule_matches_paper_and_permutes_linear():
    alphas = Coprime().layer_alphas(16)
    assert alphas == pytest.approx([0.5 + slot / 15 for slot in COPRIME_SLOTS_L16])
    assert sorted(alphas) == pytest.approx(Linear().layer_alphas(16))


def test_fixed_learned_and_custom_schedules():
    assert Fixed().layer_alphas(4) == [1.0] * 4
    assert Learned(0.5, 1.5).layer_alphas(4) == [1.0] * 4
    assert Learned(init=[0.6, 1.1]).layer_alphas(2) == [0.6, 1.1]
    assert Custom([0.7, 1.3]).layer_alphas(2) == [0.7, 1.3]
    with pytest.raises(ValueError, match=r"alphas: needs one alpha per layer \(3\), got 2"):
        Custom([0.7, 1.3]).layer_alphas(3)
    with pytest.raises(ValueError, match="schedule must be one of"):
        to_schedule("cosine")


def test_fixed_distances_at_1024_w8():
    distances = offsets.layer_distances(1.0, FIB15, 8, 1024)
    assert distances == list(range(9)) + [13, 21, 34, 55, 89, 144, 233, 377, 610, 987]
    assert len(distances) == 19


def test_linear_union_at_1024_w8_is_133():
    per_layer = [offsets.layer_distances(a, FIB15, 8, 1024) for a in Linear().layer_alphas(16)]
    union = offsets.union_distances(per_layer)
    assert len(union) == 133
    assert len([d for d in union if d > 8]) == 124


def test_distances_use_python_round_half_to_even():
    # alpha 0.5: 0.5 * 13 = 6.5 -> 6 (even), 0.5 * 21 = 10.5 -> 10, 0.5 * 55 = 27.5 -> 28
    distances = offsets.layer_distances(0.5, FIB15, 0, 1024)
    assert 6 in distances and 7 not in distances
    assert 10 in distances and 11 not in distances
    assert 28 in distances and 27 not in distances


def test_distances_clip_at_length_and_count_once():
    assert offsets.layer_distances(1.0, FIB15, 3, 10) == [0, 1, 2, 3, 5, 8]
    assert offsets.layer_distances(1.0, FIB15, 20, 10) == list(range(10))


def test_new_distances_at_4096():
    linear = Linear().layer_alphas(16)
    for layer, alpha in enumerate(linear):
        short = offsets.layer_distances(alpha, FIB15, 8, 1024)
        long = offsets.layer_distances(alpha, FIB15, 8, 4096)
        gained = sorted(set(long) - set(short))
        if layer >= 9:  # alpha > 1.0365
            assert gained == [round(alpha * 987)] and 1086 <= gained[0] <= 1480
        else:
            assert gained == []


def test_interpolated_rungs_rules():
    # alpha 1: every rung exact (frac 0); rungs with round(t) <= W are skipped
    assert offsets.interpolated_rungs(1.0, FIB15, 8, 1024) == [(f, 0.0) for f in FIB15 if f > 8]
    # lo > T - 1 skipped
    kept = offsets.interpolated_rungs(1.0, FIB15, 8, 100)
    assert [lo for lo, _ in kept] == [13, 21, 34, 55, 89]
    # a repeated lo is skipped: alpha 0.5, W 0: t = 0.5, 1, 1.5 -> lo 0, 1, 1
    kept = offsets.interpolated_rungs(0.5, [1, 2, 3], 0, 100)
    assert [(lo, frac) for lo, frac in kept] == [(1, 0.0)]  # round(0.5) = 0 skipped; 1.5 repeats lo
    lo, frac = offsets.interpolated_rungs(1.3, [55], 8, 1024)[0]
    assert lo == 71 and math.isclose(frac, 0.5, abs_tol=1e-9)
