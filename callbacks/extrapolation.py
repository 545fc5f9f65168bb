"""Length extrapolation at the end of fit: the trained weights at multiples of the training
length on every held-out set (:func:`lit_sparse.evaluation.evaluate_lengths`).

Logged as ``extrap/ppl/<set>/<T>`` and ``extrap/ppl_change_pct/<set>/<T>`` (against the
training length) at the last step; the table is written as ``extrapolation.json`` and
``extrapolation.md`` in the run directory (rank 0). Every process scores its share of the
windows; NLL sums and counts are added across processes in one reduction. On data without
text windows (the recall tasks: ``datamodule.sparse_labels``) it does nothing and says so
once; :class:`lit_sparse.callbacks.RecallEvaluation` scores those at longer lengths.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import lightning.pytorch as pl

from lit_sparse.callbacks.end_of_fit import EndOfFitEvaluation
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.extrapolation import (
    ExtrapolationResult,
    evaluate_lengths,
    extrapolation_lengths,
)

__all__ = ["LengthExtrapolation"]

log = logging.getLogger(__name__)


def has_text_windows(datamodule: Any) -> bool:
    """Whether the data has held-out text windows to score perplexity on (the recall tasks
    have labels at a few positions only)."""
    return not getattr(datamodule, "sparse_labels", False)


class LengthExtrapolation(EndOfFitEvaluation):
    """Evaluate perplexity at several lengths when training ends (and, if asked, after
    ``validate``).

    Args:
        multiples: evaluation lengths as multiples of the training length (the training
            length itself is always evaluated: changes are measured against it).
        lengths: explicit evaluation lengths (replace ``multiples``; the training length is
            added).
        new_offsets: "use" or "drop" distances that appear only beyond the training length
            (FibonacciAttention); None: the model's own value.
        batch_size: windows per batch (default: about the validation batch's tokens).
        sets: held-out sets to evaluate (default all).
        stages: when to run: "fit" (when training ends) and/or "validate" (after each
            ``trainer.validate``; the ``extrapolate`` command uses this).
        filename: stem of the JSON and Markdown files in the run directory (None: none).
        prefix: tag prefix of the logged metrics.
        print_table: print the Markdown table (rank 0).
    """

    result_type = ExtrapolationResult
    title = "the length extrapolation"

    def __init__(
        self,
        multiples: list[float] | None = None,
        lengths: list[int] | None = None,
        new_offsets: Literal["use", "drop"] | None = None,
        batch_size: int | None = None,
        sets: list[str] | None = None,
        stages: list[Literal["fit", "validate"]] | None = None,
        filename: str | None = "extrapolation",
        prefix: str = "extrap",
        print_table: bool = False,
    ):
        super().__init__(stages, filename, prefix, print_table)
        self.multiples = [1, 2, 4] if multiples is None else list(multiples)
        self.lengths = None if lengths is None else list(lengths)
        extrapolation_lengths(1024, self.multiples, self.lengths)  # validates the values
        if new_offsets not in (None, "use", "drop"):
            raise ConfigError(f"new_offsets={new_offsets!r}: expected 'use', 'drop' or None")
        self.new_offsets, self.batch_size, self.sets = new_offsets, batch_size, sets

    def evaluation_lengths(self, training_length: int) -> list[int]:
        """The lengths asked for, and the training length: the baseline of every change."""
        asked = extrapolation_lengths(training_length, self.multiples, self.lengths)
        return sorted({training_length, *asked})

    def check_data(self, datamodule: Any) -> None:
        """Called by the CLI before anything runs: on data without text windows, say once
        that this evaluation is skipped."""
        if not has_text_windows(datamodule):
            log.info(
                "LengthExtrapolation: %s has no held-out text windows (its labels are a few "
                "answers); perplexity at longer lengths is skipped (RecallEvaluation scores "
                "recall there)",
                type(datamodule).__name__,
            )

    def applies(self, trainer: pl.Trainer) -> bool:
        return has_text_windows(trainer.datamodule)

    def expected(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        return {"lengths": self.evaluation_lengths(pl_module.config.context_length)}

    def run(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: str | None = None
    ) -> ExtrapolationResult:
        """Evaluate now (every process must call this), log and write on rank 0."""
        datamodule = trainer.datamodule
        if datamodule is None or not hasattr(datamodule, "val_windows_at"):
            raise RuntimeError("LengthExtrapolation needs a datamodule with val_windows_at()")
        result = evaluate_lengths(
            pl_module,
            datamodule,
            self.evaluation_lengths(pl_module.config.context_length),
            sets=self.sets,
            new_offsets=self.new_offsets,
            batch_size=self.batch_size,
            reduce=lambda t: trainer.strategy.reduce(t, reduce_op="sum"),
            context=trainer.precision_plugin.forward_context,
            progress=trainer.is_global_zero and trainer.progress_bar_callback is not None,
        )
        return self.publish(trainer, result, checkpoint)
