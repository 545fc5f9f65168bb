"""Recall at longer lengths when fit ends: the trained weights on every held-out set of a
synthetic task (:mod:`lit_sparse.tasks`) at multiples of the training length, under each
``new_offsets`` policy (:func:`lit_sparse.evaluation.recall.evaluate_recall`).

Logged as ``recall/<policy>/acc/<set>/<T>`` at the last step; the result is written as
``recall.json`` and ``recall.md`` in the run directory (rank 0). Every process scores its
share of the examples; the counts are added across processes in one reduction. A run resumed
at its final step whose ``recall.json`` is already there (same step and lengths) is not
evaluated again.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import lightning.pytorch as pl

from lit_sparse.callbacks.end_of_fit import EndOfFitEvaluation
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.extrapolation import extrapolation_lengths
from lit_sparse.evaluation.recall import POLICIES, RecallResult, evaluate_recall
from lit_sparse.tasks.registry import list_tasks
from lit_sparse.tasks.synthetic import RecallDataModule

__all__ = ["RecallEvaluation"]


class RecallEvaluation(EndOfFitEvaluation):
    """Score recall at several lengths and policies when training ends.

    Args:
        multiples: evaluation lengths as multiples of the training length (default: 1, 4,
            16, 64 for data with sets at any length; MQAR's own settings' lengths).
        lengths: explicit evaluation lengths (replace ``multiples``).
        new_offsets: the policies for distances that appear only beyond the training length
            ("use", "drop"); a plugin without the option is scored once, as trained.
        batch_tokens: tokens per evaluation batch (default: the validation batch's).
        stages: when to run: "fit" (when training ends) and/or "validate".
        filename: stem of the JSON and Markdown files in the run directory (None: none).
        prefix: tag prefix of the logged metrics.
        print_table: print the Markdown table (rank 0).
    """

    result_type = RecallResult
    title = "the recall evaluation"

    def __init__(
        self,
        multiples: list[float] | None = None,
        lengths: list[int] | None = None,
        new_offsets: list[Literal["use", "drop"]] | None = None,
        batch_tokens: int | None = None,
        stages: list[Literal["fit", "validate"]] | None = None,
        filename: str | None = "recall",
        prefix: str = "recall",
        print_table: bool = False,
    ):
        super().__init__(stages, filename, prefix, print_table)
        self.multiples = None if multiples is None else list(multiples)
        self.lengths = None if lengths is None else list(lengths)
        if self.multiples is not None or self.lengths is not None:
            extrapolation_lengths(256, self.multiples or [1], self.lengths)  # validates them
        self.new_offsets = list(POLICIES) if new_offsets is None else list(new_offsets)
        if not self.new_offsets or any(p not in POLICIES for p in self.new_offsets):
            raise ConfigError(
                f"new_offsets={new_offsets!r}: expected one or more of {', '.join(POLICIES)}"
            )
        if batch_tokens is not None and (isinstance(batch_tokens, bool) or batch_tokens < 1):
            raise ConfigError(f"batch_tokens={batch_tokens!r}: expected an integer >= 1")
        self.batch_tokens = batch_tokens

    def check_data(self, datamodule: Any) -> None:
        """Called by the CLI before anything runs: the data must be a synthetic task."""
        if not isinstance(datamodule, RecallDataModule):
            raise ConfigError(
                f"RecallEvaluation needs the data of a synthetic task (registered: "
                f"{', '.join(list_tasks('synthetic'))}), not {type(datamodule).__name__}"
            )

    def evaluation_lengths(self, datamodule: Any, training_length: int) -> list[int]:
        if self.multiples is None and self.lengths is None:
            own = getattr(datamodule, "eval_lengths", None)
            if callable(own):
                return extrapolation_lengths(training_length, lengths=own())
            return extrapolation_lengths(training_length, [1, 4, 16, 64])
        return extrapolation_lengths(training_length, self.multiples or [1], self.lengths)

    def expected(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        lengths = self.evaluation_lengths(trainer.datamodule, pl_module.config.context_length)
        return {"lengths": lengths, "policies": self.new_offsets}

    def run(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: str | None = None
    ) -> RecallResult:
        """Evaluate now (every process must call this), log and write on rank 0."""
        datamodule = trainer.datamodule
        self.check_data(datamodule)

        def progress(line: str) -> None:
            if trainer.is_global_zero:
                print(line, file=sys.stderr, flush=True)

        result = evaluate_recall(
            pl_module,
            datamodule,
            self.evaluation_lengths(datamodule, pl_module.config.context_length),
            self.new_offsets,
            batch_tokens=self.batch_tokens,
            reduce=lambda t: trainer.strategy.reduce(t, reduce_op="sum"),
            context=trainer.precision_plugin.forward_context,
            progress=progress,
        )
        return self.publish(trainer, result, checkpoint)
