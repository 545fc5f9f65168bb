"""What the end-of-fit evaluations share (:class:`LengthExtrapolation`,
:class:`RecallEvaluation`): when they run, skipping one a resumed run already holds, and
publishing the result (:func:`lit_sparse.callbacks.run_dir.publish_result`).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, ClassVar, Literal

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerFn

from lit_sparse.callbacks.run_dir import publish_result, run_dir
from lit_sparse.errors import ConfigError

__all__ = ["EndOfFitEvaluation"]


class EndOfFitEvaluation(pl.Callback):
    """An evaluation of the trained weights when fit ends (stage ``"fit"``) and, if asked,
    after each ``trainer.validate`` (stage ``"validate"``). A subclass computes the result in
    :meth:`run` and hands it to :meth:`publish`; :meth:`expected` names what a saved result
    must match for a resumed run to skip the evaluation."""

    result_type: ClassVar[type]
    title: ClassVar[str] = "the end-of-fit evaluation"
    """What the run prints when it starts, ends or skips this evaluation."""

    def __init__(
        self,
        stages: list[Literal["fit", "validate"]] | None,
        filename: str | None,
        prefix: str,
        print_table: bool,
    ):
        super().__init__()
        self.stages = ["fit"] if stages is None else list(stages)
        if any(s not in ("fit", "validate") for s in self.stages):
            raise ConfigError(f"stages={self.stages!r}: expected 'fit' and/or 'validate'")
        self.filename, self.prefix, self.print_table = filename, prefix, print_table
        self.result = None
        self._checkpoint_step: int | None = None

    def applies(self, trainer: pl.Trainer) -> bool:
        """Whether this run's data is one the evaluation scores."""
        return True

    def expected(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
        """The fields a saved result must hold to count as this evaluation."""
        raise NotImplementedError

    def run(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: str | None = None
    ):
        """Evaluate now (every process must call this), log and write on rank 0."""
        raise NotImplementedError

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict
    ) -> None:
        # validate does not restore the step counter: remember the weights' training step
        self._checkpoint_step = checkpoint.get("global_step")

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.applies(trainer) or "fit" not in self.stages:
            return
        if trainer.fast_dev_run:  # its files go to a temporary folder, removed at the end
            self._say(
                trainer,
                f"fast_dev_run: {self.title} at the end of fit is skipped (its result would "
                "be removed with the run's other files)",
            )
            return
        if self._done_at(trainer):
            return
        # the progress bar sits at its last step meanwhile: say what runs, and how long it took
        self._say(trainer, f"{self.title} of the trained weights (step {trainer.global_step}) ...")
        start = time.perf_counter()
        self.run(trainer, pl_module)
        self._say(trainer, f"{self.title}: done in {time.perf_counter() - start:.0f} s")

    @staticmethod
    def _say(trainer: pl.Trainer, line: str) -> None:
        if trainer.is_global_zero:
            print(line, file=sys.stderr, flush=True)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if (
            self.applies(trainer)
            and "validate" in self.stages
            and trainer.state.fn == TrainerFn.VALIDATING
        ):
            self.run(trainer, pl_module, checkpoint=trainer.ckpt_path)

    def _done_at(self, trainer: pl.Trainer) -> bool:
        """Whether the run folder already holds this evaluation at this step (a run resumed
        at its final step only completes what is missing); if so, rank 0's ``result`` is the
        saved one. Every process gets rank 0's answer."""
        done = False
        if trainer.is_global_zero and self.filename:
            folder = run_dir(trainer)
            expected = self.expected(trainer, trainer.lightning_module)
            try:
                saved = json.loads((folder / f"{self.filename}.json").read_text())
                done = (
                    isinstance(saved, dict)
                    and saved.get("step") == trainer.global_step
                    and saved.get("checkpoint") is None
                    and all(saved.get(key) == value for key, value in expected.items())
                    and (folder / f"{self.filename}.md").is_file()
                )
                if done:
                    self.result = self.result_type.from_dict(saved)
            except (OSError, ValueError, KeyError, TypeError):
                done = False
        return bool(trainer.strategy.broadcast(done))

    def publish(self, trainer: pl.Trainer, result, checkpoint: str | None):
        """Keep the result as ``self.result``, stamp it, log it and write it (rank 0)."""
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
