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

import json
import logging
from typing import Any, Literal

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerFn

from lit_sparse.callbacks.run_dir import publish_result, run_dir
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


class LengthExtrapolation(pl.Callback):
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
        super().__init__()
        self.multiples = [1, 2, 4] if multiples is None else list(multiples)
        self.lengths = None if lengths is None else list(lengths)
        extrapolation_lengths(1024, self.multiples, self.lengths)  # validates the values
        if new_offsets not in (None, "use", "drop"):
            raise ConfigError(f"new_offsets={new_offsets!r}: expected 'use', 'drop' or None")
        self.stages = ["fit"] if stages is None else list(stages)
        bad = [s for s in self.stages if s not in ("fit", "validate")]
        if bad:
            raise ConfigError(f"stages={self.stages!r}: expected 'fit' and/or 'validate'")
        self.new_offsets, self.batch_size, self.sets = new_offsets, batch_size, sets
        self.filename, self.prefix, self.print_table = filename, prefix, print_table
        self.result: ExtrapolationResult | None = None
        self._checkpoint_step: int | None = None

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict
    ) -> None:
        # validate does not restore the step counter: remember the weights' training step
        self._checkpoint_step = checkpoint.get("global_step")

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

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not has_text_windows(trainer.datamodule):
            return
        if "fit" in self.stages and not self._done_at(trainer):
            self.run(trainer, pl_module)

    def _done_at(self, trainer: pl.Trainer) -> bool:
        """Whether the run folder already holds this evaluation at this step (a run resumed
        at its final step only completes what is missing); if so, rank 0's ``result`` is the
        saved one. Every process gets rank 0's answer."""
        done = False
        if trainer.is_global_zero and self.filename:
            folder = run_dir(trainer)
            try:
                saved = json.loads((folder / f"{self.filename}.json").read_text())
                done = (
                    isinstance(saved, dict)
                    and saved.get("step") == trainer.global_step
                    and saved.get("checkpoint") is None
                    and saved.get("lengths")
                    == self.evaluation_lengths(trainer.lightning_module.config.context_length)
                    and (folder / f"{self.filename}.md").is_file()
                )
                if done:
                    self.result = ExtrapolationResult.from_dict(saved)
            except (OSError, ValueError, KeyError, TypeError):
                done = False
        return bool(trainer.strategy.broadcast(done))

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not has_text_windows(trainer.datamodule):
            return
        if "validate" in self.stages and trainer.state.fn == TrainerFn.VALIDATING:
            self.run(trainer, pl_module, checkpoint=trainer.ckpt_path)

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
        self.result = result
        publish_result(
            trainer,
            result,
            prefix=self.prefix,
            filename=self.filename,
            checkpoint=checkpoint,
            checkpoint_step=self._checkpoint_step,
            print_table=self.print_table,
        )
        return result
