"""The conformance kit catches what it claims to: each check fails on a plugin broken in
that one way (and the same plugin, unbroken, passes)."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from lit_sparse import build_attention, testing
from lit_sparse.attention import AttentionPlugin, SlotPattern
from lit_sparse.attention.decoding import SlotDecoder
from lit_sparse.kernels import KeySlots, exact_slots


class WindowPattern(SlotPattern):
    """Distances 0..W; subclasses break it one way each."""

    def __init__(self, training_length: int, window: int):
        super().__init__(training_length)
        self.window = window

    def distances(self, length: int) -> list[int]:
        return list(range(min(self.window, length - 1) + 1))

    def build_slots(self, length: int, device: torch.device) -> KeySlots:
        return exact_slots(self.distances(length), device)


class PeekingPattern(WindowPattern):
    """Position t returns position t + 1's output: it reads the future (its reference
    does the same, so only causality can tell)."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return super().forward(q, k, v).roll(-1, dims=2)

    def reference(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return super().reference(q, k, v).roll(-1, dims=2)


class ShortForwardPattern(WindowPattern):
    """The training path drops the window's last distance; the reference keeps it."""

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        slots = self.slots(q.shape[-2], q.device)
        kept = exact_slots(slots.distances[:-1].tolist() or [0], q.device)
        from lit_sparse.kernels import sparse_attention

        return sparse_attention(q, k, v, kept)


class LengthDependentPattern(WindowPattern):
    """Attends to distance T // 2 as well: a position's keys depend on the sequence's length
    (causal at any one length, so only prefix consistency can tell)."""

    def distances(self, length: int) -> list[int]:
        return sorted({*super().distances(length), length // 2})


class UnsavedStatePattern(WindowPattern):
    """Scales its output by a random factor drawn at build time and kept out of the
    checkpoint (a non-persistent buffer)."""

    def __init__(self, training_length: int, window: int):
        super().__init__(training_length, window)
        self.register_buffer("scale", torch.rand(()) + 0.5, persistent=False)

    def forward(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return super().forward(q, k, v) * self.scale

    def reference(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        return super().reference(q, k, v) * self.scale


class OneShortDecoder(SlotDecoder):
    """Reads every slot but the window's last distance once decoding starts."""

    def __init__(self, pattern, shape):
        slots = pattern.slots(shape.max_length, shape.device)
        super().__init__(pattern, shape, exact_slots(slots.distances[:-1].tolist(), shape.device))


class MisreadingDecoderPattern(WindowPattern):
    """Trains right, but its decoder drops a distance (only decoding can tell)."""

    def decoder(self, shape):
        return OneShortDecoder(self, shape)


PATTERNS = {
    "window": WindowPattern,
    "peeking": PeekingPattern,
    "short_forward": ShortForwardPattern,
    "length_dependent": LengthDependentPattern,
    "unsaved_state": UnsavedStatePattern,
    "misreading_decoder": MisreadingDecoderPattern,
}


class TestAttention(AttentionPlugin):
    """Not registered: the kit takes any plugin instance."""

    __test__ = False  # not a pytest class

    def __init__(self, window: int = 3, kind: str = "window"):
        self.window, self.kind = window, kind

    def build(self, layer: int, n_layers: int, training_length: int) -> WindowPattern:
        return PATTERNS[self.kind](training_length, self.window)


class DoublingAttention(TestAttention):
    """Keeps its option doubled, so its config does not rebuild it."""

    def __init__(self, window: int = 3, kind: str = "window"):
        super().__init__(window, kind)
        self.window = 2 * window


@pytest.mark.parametrize(
    "check",
    [c for c in testing.CHECKS if c is not testing.check_linear_memory],
)
def test_an_unbroken_plugin_passes(check):
    check(TestAttention())


@pytest.mark.parametrize(
    ("check", "kind", "message"),
    [
        (testing.check_causality, "peeking", "depend on later inputs"),
        (testing.check_reference, "short_forward", "output"),
        (testing.check_prefix_consistency, "length_dependent", "alone vs in 300"),
        (testing.check_checkpoint_round_trip, "unsaved_state", "logits differ"),
        (testing.check_decoding, "misreading_decoder", "decoding after a 5-token prompt"),
    ],
)
def test_a_broken_plugin_fails_its_check(check, kind, message):
    with pytest.raises(AssertionError, match=message):
        check(TestAttention(kind=kind))


def test_a_config_that_does_not_rebuild_the_plugin_fails():
    with pytest.raises(AssertionError, match="builds"):
        testing.check_config_round_trip(DoublingAttention(window=3))


@pytest.mark.slow
def test_linear_memory_catches_a_quadratic_path():
    """The dense-mask reference of fibonacci, measured as the check measures: over the
    budget (37 MB at 512, 24x q, k, v), and 4x the length costs 14x the memory (525 MB at
    2k): both criteria fail."""
    plugin = build_attention("fibonacci", window=12)
    rises = testing.peak_rises_mb(plugin, (512, 2048), 1024, path="reference")
    with pytest.raises(AssertionError, match="more than 10 x its q, k, v"):
        testing._check_memory_rises("reference", rises, budget=10)
    with pytest.raises(AssertionError, match="faster than linear"):
        testing._check_memory_rises("reference", rises, budget=1000)


class NegativeDistancePattern(WindowPattern):
    """Attends to distance -1 as well: the key after its query (the kernels would read
    past the sequence's last row)."""

    def distances(self, length: int) -> list[int]:
        return [-1, *super().distances(length)]


PATTERNS["negative_distance"] = NegativeDistancePattern


def test_slots_outside_the_sequence_fail_their_check_and_are_refused_where_used():
    """The kit's bounds check names the pattern and the value; every other path that
    builds the slots (here the prefix check's forward) gets the same ValueError instead of
    numbers read from memory outside the inputs (the issue saw differences of 1.8e25)."""
    bad = TestAttention(kind="negative_distance")
    with pytest.raises(AssertionError, match="layer 0, T=1: .*NegativeDistancePattern.build_slots"):
        testing.check_slot_bounds(bad)
    with pytest.raises(ValueError, match="distance -1 is negative") as caught:
        testing.check_prefix_consistency(bad)
    assert "NegativeDistancePattern" in str(caught.value) and "\n" not in str(caught.value)
