"""Fibonacci-offset sparse attention: a window plus rungs scaled by a per-layer alpha (schedules
in ``schedules``, layers in ``fibonacci_patterns`` and ``gaussian_read``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from lit_sparse.attention import offsets
from lit_sparse.attention.base import AttentionPlugin
from lit_sparse.attention.fibonacci_patterns import FibonacciPattern, NewOffsets, RungLayout
from lit_sparse.attention.options import at_least, check_choices
from lit_sparse.attention.registry import register_attention
from lit_sparse.attention.schedules import (
    Custom,
    Schedule,
    ScheduleName,
    from_flat_options,
    to_schedule,
)


@register_attention("fibonacci")
class FibonacciAttention(AttentionPlugin):
    """Window W plus rung distances round(alpha_l * f), with a per-layer alpha schedule."""

    def __init__(
        self,
        window: int = 8,
        rungs: Literal["fibonacci", "pow2"] = "fibonacci",
        n_rungs: int = 15,
        schedule: Schedule | ScheduleName = "fixed",
        new_offsets: NewOffsets = "use",
    ):
        """
        Args:
            window: every distance 0..W is attended (W >= 0).
            rungs: "fibonacci" (1, 2, 3, 5, ..., the first n_rungs) or "pow2" (powers of two
                <= T - 1 at the training length T; longer sequences add larger ones from T on).
            n_rungs: number of Fibonacci rungs (K; 15 reaches 987).
            schedule: alpha per layer, by class_path with options or by name with defaults:
                Fixed (1), Linear(alpha_min, alpha_max) (a ramp over depth), Coprime (the
                ramp staggered), Custom(alphas) or Learned(alpha_min, alpha_max, init, read).
            new_offsets: distances seen only beyond the training length: "use" (the paper)
                or "drop".
        """
        at_least(0, window=window, n_rungs=n_rungs)
        self.window, self.rungs, self.n_rungs = window, rungs, n_rungs
        self.schedule, self.new_offsets = to_schedule(schedule), new_offsets
        check_choices(self)
        if rungs == "fibonacci":  # pow2's rungs are known in build, at the training length
            offsets.check_alpha_reach(offsets.fibonacci_rungs(n_rungs), **self.schedule.largest())

    @classmethod
    def upgrade_init_args(cls, init_args: Mapping[str, Any]) -> dict[str, Any]:
        """Options written before the schedule types (flat ``alpha_min``, ...) as today's."""
        return from_flat_options(init_args)

    def check(self, n_layers: int) -> None:
        self.schedule.check(n_layers)

    def layer_alphas(self, n_layers: int) -> list[float]:
        return self.schedule.layer_alphas(n_layers)

    def build(self, layer: int, n_layers: int, training_length: int) -> FibonacciPattern:
        if self.rungs == "pow2":
            offsets.check_alpha_reach(
                offsets.pow2_rungs(training_length), **self.schedule.largest()
            )
        alpha = self.layer_alphas(n_layers)[layer]
        options = (self.window, self.rungs, self.n_rungs, self.new_offsets)
        return self.schedule.pattern(RungLayout(training_length, *options), alpha)

    @classmethod
    def conformance_cases(cls, window: int, n_layers: int) -> dict[str, AttentionPlugin]:
        """Every schedule on both rung bases, and a custom schedule of ``n_layers`` alphas."""
        cases: dict[str, AttentionPlugin] = {
            f"fibonacci-{schedule}-{rungs}": cls(window=window, schedule=schedule, rungs=rungs)
            for schedule in ("fixed", "linear", "coprime", "learned")
            for rungs in ("fibonacci", "pow2")
        }
        alphas = [0.6 + 0.85 * i / max(1, n_layers - 1) for i in range(n_layers)][::-1]
        cases["fibonacci-custom"] = cls(window=window, schedule=Custom(alphas))
        return cases

    @classmethod
    def bench_cases(cls, keys: int, window: int) -> dict[str, AttentionPlugin]:
        """The fixed schedule (it defines ``keys``) and the learned one, window W."""
        return {
            "fibonacci": cls(window=window),
            "fibonacci_learned": cls(window=window, schedule="learned"),
        }
