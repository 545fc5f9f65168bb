"""Alpha trajectories: the alpha of every layer that has one, at step 0 and every N optimizer
steps (a hybrid's layers without alpha, such as its dense layers, have no line).

Logged as scalars ``alpha/layer_00`` ... (one TensorBoard run per training run: its Custom
Scalars chart "alpha per layer" holds every layer's line) and, at each validation, a layers x
steps heatmap ``alpha/heatmap``; with ``layer_runs`` each layer's alpha is also the tag
``alpha`` of its own small run (``<run>/alpha/layer_00`` ...), a colour per layer at the cost
of a run per layer (:mod:`lit_sparse.callbacks.tensorboard`). Static schedules are logged
too; models without alpha log nothing. The trajectory is the callback's checkpoint state, so
a resumed run continues the same curves and ``lit_sparse.load_run`` reads it without
TensorBoard; it is also written to ``alpha_trajectory.json`` in the run directory at each
validation and at the end.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import numpy as np

from lit_sparse.callbacks.images import heatmap_image, log_image
from lit_sparse.callbacks.run_dir import evaluated_step, purge_step, run_dir, write_json
from lit_sparse.callbacks.tensorboard import CATEGORY, SeriesRuns, write_layout
from lit_sparse.errors import ConfigError

__all__ = ["AlphaTrajectory", "alpha_tag", "custom_scalars_layout", "layer_run"]

FORMAT = "lit_sparse.alpha_trajectory/1"
"""Its state's format; ``layers`` (the layers with alpha) was added without a new version: a
state without it holds every layer."""


def alpha_tag(layer: int, prefix: str = "alpha") -> str:
    """The scalar tag of one layer's alpha: ``alpha/layer_00``."""
    return f"{prefix}/layer_{layer:02d}"


def layer_run(layer: int, prefix: str = "alpha") -> str:
    """The run inside the run's log folder that holds one layer's alpha: ``alpha/layer_00``."""
    return alpha_tag(layer, prefix)


def custom_scalars_layout(prefix: str = "alpha", layer_runs: bool = False) -> dict:
    """The Custom Scalars chart of every layer's alpha: the run's tags ``<prefix>/layer_XX``
    (a marker and a name per layer), or with ``layer_runs`` the tag ``<prefix>`` of the
    layers' runs (:func:`layer_run`, a colour per layer)."""
    pattern = rf"^{prefix}$" if layer_runs else rf"^{prefix}/layer_\d+$"
    return {CATEGORY: {f"{prefix} per layer": ["Multiline", [pattern]]}}


class AlphaTrajectory(pl.Callback):
    """Record and log every layer's alpha over optimizer steps.

    Args:
        every_n_steps: record every N optimizer steps (and at step 0, at the start of a
            resumed run and at the end of training).
        heatmap: log a layers x steps image at each validation.
        prefix: tag prefix of the scalars and the image.
        filename: JSON file written in the run directory (None: none).
        layer_runs: with TensorBoard, also write each layer's alpha to its own run
            ``<run>/<prefix>/layer_XX`` (tag ``<prefix>``): the chart of all layers gets a
            colour per layer (TensorBoard colours lines by run), and the runs panel a run
            per layer. Off: one run per training run, its chart's lines told apart by marker
            and named in its list of matches.
    """

    def __init__(
        self,
        every_n_steps: int = 50,
        heatmap: bool = True,
        prefix: str = "alpha",
        filename: str | None = "alpha_trajectory.json",
        layer_runs: bool = False,
    ):
        super().__init__()
        if (
            isinstance(every_n_steps, bool)
            or not isinstance(every_n_steps, int)
            or every_n_steps < 1
        ):
            raise ConfigError(f"every_n_steps={every_n_steps!r}: expected an integer >= 1")
        self.every_n_steps = every_n_steps
        self.heatmap = heatmap
        self.prefix = prefix
        self.filename = filename
        self.layer_runs = layer_runs
        self.steps: list[int] = []
        self.alphas: list[list[float]] = []
        self.layers: list[int] | None = None  # the model's layers with an alpha, in order
        self._logged_dir: str | None = None  # the log folder the points were written to
        self._series = SeriesRuns()
        self._checkpoint_step: int | None = None  # the evaluated weights' step (validate)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "every_n_steps": self.every_n_steps,
            "steps": list(self.steps),
            "alphas": [list(a) for a in self.alphas],
            "layers": self.layers,
            "log_dir": self._logged_dir,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.steps = [int(s) for s in state_dict.get("steps", [])]
        self.alphas = [[float(v) for v in a] for a in state_dict.get("alphas", [])]
        layers = state_dict.get("layers")
        if layers is None and self.alphas:  # written before hybrids: every layer
            layers = list(range(len(self.alphas[0])))
        self.layers = None if layers is None else [int(layer) for layer in layers]
        self._logged_dir = state_dict.get("log_dir")

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict
    ) -> None:
        # validate does not restore the step counter: remember the weights' training step
        self._checkpoint_step = checkpoint.get("global_step")

    def as_array(self) -> tuple[np.ndarray, np.ndarray]:
        """(steps (S,), alphas (S, L)) recorded so far."""
        return np.asarray(self.steps, dtype=np.int64), np.asarray(self.alphas, dtype=np.float64)

    # ------------------------------------------------------------------ recording
    @staticmethod
    def _current(pl_module: pl.LightningModule) -> dict[int, float] | None:
        """The alpha of each layer that has one; None when no layer has."""
        model = getattr(pl_module, "model", pl_module)
        alphas = model.layer_alphas() if hasattr(model, "layer_alphas") else {}
        return {layer: float(a) for layer, a in alphas.items()} or None

    def _record(self, trainer: pl.Trainer, pl_module: pl.LightningModule, step: int) -> None:
        if self.steps and self.steps[-1] >= step:
            return
        current = self._current(pl_module)
        if current is None:
            return
        if self.layers is not None and self.layers != list(current):
            raise ConfigError(
                f"AlphaTrajectory: the model's layers with alpha are {list(current)}, the "
                f"recorded trajectory's {self.layers} (another model was resumed)"
            )
        self.layers, values = list(current), list(current.values())
        self.steps.append(step)
        self.alphas.append(values)
        if trainer.is_global_zero:
            self._log_points(trainer, [(step, values)])

    def _log_points(self, trainer: pl.Trainer, points: list[tuple[int, list[float]]]) -> None:
        for step, values in points:
            layers = self.layers or range(len(values))
            metrics = {alpha_tag(i, self.prefix): v for i, v in zip(layers, values, strict=True)}
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=step)
            if self.layer_runs:
                runs = {layer_run(i, self.prefix): v for i, v in zip(layers, values, strict=True)}
                self._series.log(trainer, runs, tag=self.prefix, step=step)

    def custom_scalar_charts(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict:
        """This callback's charts of the run's Custom Scalars layout (none without alpha)."""
        if self._current(pl_module) is None:
            return {}
        return custom_scalars_layout(self.prefix, self.layer_runs)[CATEGORY]

    # ------------------------------------------------------------------ hooks
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._current(pl_module) is None:
            return
        if trainer.is_global_zero:
            write_layout(trainer, pl_module)
            here = str(run_dir(trainer))
            points = list(zip(self.steps, self.alphas, strict=True))
            if self._logged_dir != here:
                # resumed into a new log folder: the curves there start from step 0 too
                self._log_points(trainer, points)
            else:
                # resumed in place: the CLI purges events from the checkpoint's step on (one
                # later at a finished run's end; TensorBoard purge_step), so the points
                # recorded there are written again
                purged = purge_step(trainer)
                if purged is not None:
                    self._log_points(trainer, [p for p in points if p[0] >= purged])
            self._logged_dir = here
        self._record(trainer, pl_module, trainer.global_step)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        step = trainer.global_step
        if step % self.every_n_steps == 0:
            self._record(trainer, pl_module, step)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not self.steps or not trainer.is_global_zero:
            return
        if self.heatmap:
            steps, alphas = self.as_array()
            image = heatmap_image(
                alphas.T, steps, "alpha per layer", "optimizer step", "layer", rows=self.layers
            )
            step = evaluated_step(trainer, self._checkpoint_step)
            log_image(trainer, f"{self.prefix}/heatmap", image, step)
        self._write_json(trainer)
        self._series.flush()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._record(trainer, pl_module, trainer.global_step)
        if trainer.is_global_zero and self.steps:
            self._write_json(trainer)
            for logger in trainer.loggers:
                logger.save()
        self._series.close()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._series.close()  # a fit that stopped on an error flushes what it wrote

    def _write_json(self, trainer: pl.Trainer) -> None:
        if self.filename:
            write_json(run_dir(trainer) / self.filename, self.state_dict())
