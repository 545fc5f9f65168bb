"""Fibonacci-offset sparse attention: a window plus rungs scaled by a per-layer alpha.

The plugin (its options and schedules); the per-layer patterns it builds are in
:mod:`lit_sparse.attention.fibonacci_patterns` and :mod:`lit_sparse.attention.gaussian_read`.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Literal

from lit_sparse.attention import offsets
from lit_sparse.attention.base import AttentionPlugin
from lit_sparse.attention.fibonacci_patterns import (
    FibonacciPattern,
    LearnedFibonacciPattern,
    NewOffsets,
    RungLayout,
    RungRead,
)
from lit_sparse.attention.gaussian_read import GaussianFibonacciPattern
from lit_sparse.attention.options import at_least, check_choices, positive, share
from lit_sparse.attention.registry import register_attention
from lit_sparse.errors import ConfigError

log = logging.getLogger(__name__)


@functools.cache
def _warn_coprime_is_linear(n_layers: int) -> None:
    """Once per depth and process: at this depth the coprime schedule is the linear one."""
    log.warning(
        "schedule 'coprime' at %d layers is the 'linear' schedule: the largest stride <= L/2 "
        "coprime with L is 1 (depths 1, 2, 3, 4 and 6); use a depth such as 5, 7 or 8 for a "
        "coprime stagger that differs from linear",
        n_layers,
    )


@register_attention("fibonacci")
class FibonacciAttention(AttentionPlugin):
    """Window W plus rung distances round(alpha_l * f), with a per-layer alpha schedule."""

    def __init__(
        self,
        window: int = 8,
        rungs: Literal["fibonacci", "pow2"] = "fibonacci",
        n_rungs: int = 15,
        schedule: Literal["fixed", "learned", "linear", "coprime", "custom"] = "fixed",
        alpha_min: float = 0.5,
        alpha_max: float = 1.5,
        alphas: list[float] | None = None,
        new_offsets: NewOffsets = "use",
        alpha_init: list[float] | None = None,
        rung_read: RungRead = "interpolate",
        rung_width_start: float = 40.0,
        rung_width_end: float = 0.5,
        rung_width_anneal: float = 0.8,
    ):
        """
        Args:
            window: every distance 0..W is attended (W >= 0).
            rungs: "fibonacci" (1, 2, 3, 5, ... , the first n_rungs) or "pow2" (every power
                of two <= T - 1 at the training length T; longer sequences add the larger
                powers' distances from T on, with new_offsets "use").
            n_rungs: number of Fibonacci rungs (K; 15 reaches 987).
            schedule: alpha per layer: "fixed" (1), "learned" (alpha_min + (alpha_max -
                alpha_min) * sigmoid(theta), theta = 0 at start), "linear" (a ramp from
                alpha_min to alpha_max over depth), "coprime" (the ramp's values, layer l
                taking slot (S * l) mod L, S the largest stride <= L/2 coprime with L) or
                "custom" (the list in ``alphas``).
            alpha_min: low end of the alpha range (> 0).
            alpha_max: high end of the alpha range (> alpha_min).
            alphas: one alpha per layer for schedule "custom".
            new_offsets: distances that appear only beyond the training length: "use" them
                (the paper) or "drop" them.
            alpha_init: schedule "learned" only: each layer's starting alpha (one per layer,
                each strictly between alpha_min and alpha_max); None starts every layer at
                the middle of the range.
            rung_read: schedule "learned" only: how a rung reads rows at the non-integer
                distance alpha * f: "interpolate" (two rows, floor and floor + 1; linear in T)
                or "gaussian" (a normalised Gaussian band of rows centred at alpha * f, the
                paper's probe "blur"; dense, O(T^2): short sequences only).
            rung_width_start: rung_read "gaussian": the band's width (sigma, positions) at
                the start of training.
            rung_width_end: rung_read "gaussian": the width after annealing.
            rung_width_anneal: rung_read "gaussian": the share of training steps over which
                the width goes linearly from start to end (the trainer sets it each step).
        """
        at_least(0, window=window, n_rungs=n_rungs)
        if not (0 < alpha_min < alpha_max < math.inf):
            raise ConfigError(
                f"alpha_min, alpha_max must satisfy 0 < alpha_min < alpha_max < inf, "
                f"got alpha_min={alpha_min}, alpha_max={alpha_max}"
            )
        positive(rung_width_start=rung_width_start, rung_width_end=rung_width_end)
        share(rung_width_anneal=rung_width_anneal)
        self.window, self.rungs, self.n_rungs, self.schedule = window, rungs, n_rungs, schedule
        self.alpha_min, self.alpha_max, self.new_offsets = alpha_min, alpha_max, new_offsets
        self.alphas = None if alphas is None else [float(a) for a in alphas]
        self.alpha_init = None if alpha_init is None else [float(a) for a in alpha_init]
        self.rung_read = rung_read
        self.rung_width_start, self.rung_width_end = float(rung_width_start), float(rung_width_end)
        self.rung_width_anneal = float(rung_width_anneal)
        check_choices(self)
        self._check_schedule_options()
        if rungs == "fibonacci":  # pow2's rungs are known in build, at the training length
            self._check_reach(offsets.fibonacci_rungs(n_rungs))

    def _check_reach(self, rungs: list[int]) -> None:
        """Every alpha this plugin may give a layer times its largest rung is a distance the
        offsets compute exactly (:func:`offsets.check_alpha_reach`)."""
        custom = {f"alphas[{i}]": a for i, a in enumerate(self.alphas or [])}
        offsets.check_alpha_reach(rungs, alpha_max=self.alpha_max, **custom)

    def _check_schedule_options(self) -> None:
        """The options that only some schedules read: custom ``alphas``, learned
        ``alpha_init`` and the Gaussian ``rung_read``."""
        schedule, alphas, alpha_init = self.schedule, self.alphas, self.alpha_init
        if schedule == "custom":
            if not alphas:
                raise ConfigError("alphas: schedule 'custom' needs a list of one alpha per layer")
            bad = [a for a in alphas if not (0 < a < math.inf)]
            if bad:
                raise ConfigError(f"alphas must all be in (0, inf), got {bad}")
        elif alphas is not None:
            raise ConfigError(f"alphas is only read by schedule 'custom', not {schedule!r}")
        if alpha_init is not None:
            if schedule != "learned":
                raise ConfigError(
                    f"alpha_init is only read by schedule 'learned', not {schedule!r}"
                )
            bad = [a for a in alpha_init if not (self.alpha_min < a < self.alpha_max)]
            if not alpha_init or bad:
                raise ConfigError(
                    f"alpha_init={alpha_init}: expected one alpha per layer, each strictly "
                    f"between alpha_min={self.alpha_min} and alpha_max={self.alpha_max}"
                    + (f" (outside: {bad})" if bad else "")
                )
        if self.rung_read == "gaussian" and schedule != "learned":
            raise ConfigError(
                f"rung_read='gaussian' needs schedule 'learned' (static schedules read whole "
                f"rows), got schedule={schedule!r}"
            )

    def check(self, n_layers: int) -> None:
        if self.schedule == "custom" and len(self.alphas) != n_layers:
            raise ConfigError(
                f"alphas: schedule 'custom' needs one alpha per layer ({n_layers}), "
                f"got {len(self.alphas)}"
            )
        if self.alpha_init is not None and len(self.alpha_init) != n_layers:
            raise ConfigError(
                f"alpha_init: needs one alpha per layer ({n_layers}), got {len(self.alpha_init)}"
            )

    def layer_alphas(self, n_layers: int) -> list[float]:
        """Every layer's alpha at initialisation."""
        self.check(n_layers)
        if self.schedule == "coprime" and offsets.coprime_stride(n_layers) == 1:
            _warn_coprime_is_linear(n_layers)
        if self.alpha_init is not None:
            return list(self.alpha_init)
        return offsets.schedule_alphas(
            self.schedule, n_layers, self.alpha_min, self.alpha_max, self.alphas
        )

    def build(self, layer: int, n_layers: int, training_length: int) -> FibonacciPattern:
        if self.rungs == "pow2":
            self._check_reach(offsets.pow2_rungs(training_length))
        alpha = self.layer_alphas(n_layers)[layer]
        layout = RungLayout(
            training_length, self.window, self.rungs, self.n_rungs, self.new_offsets
        )
        if self.schedule != "learned":
            return FibonacciPattern(layout, alpha)
        if self.rung_read == "gaussian":
            widths = (self.rung_width_start, self.rung_width_end, self.rung_width_anneal)
            return GaussianFibonacciPattern(layout, alpha, self.alpha_min, self.alpha_max, *widths)
        return LearnedFibonacciPattern(layout, alpha, self.alpha_min, self.alpha_max)

    @classmethod
    def conformance_cases(cls, window: int, n_layers: int) -> dict[str, AttentionPlugin]:
        """Every schedule on both rung bases, and a custom schedule of ``n_layers`` alphas."""
        cases: dict[str, AttentionPlugin] = {
            f"fibonacci-{schedule}-{rungs}": cls(window=window, schedule=schedule, rungs=rungs)
            for schedule in ("fixed", "linear", "coprime", "learned")
            for rungs in ("fibonacci", "pow2")
        }
        alphas = [0.6 + 0.85 * i / max(1, n_layers - 1) for i in range(n_layers)][::-1]
        cases["fibonacci-custom"] = cls(window=window, schedule="custom", alphas=alphas)
        return cases

    @classmethod
    def bench_cases(cls, keys: int, window: int) -> dict[str, AttentionPlugin]:
        """The fixed schedule (it defines ``keys``) and the learned one, window W."""
        return {
            "fibonacci": cls(window=window),
            "fibonacci_learned": cls(window=window, schedule="learned"),
        }
