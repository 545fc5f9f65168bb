"""Position-binned loss: mean NLL in bins of position within the validation window.

Per held-out set, a :class:`PositionBinnedNLL` metric sums the per-position NLL the module's
``validation_step`` returns (``{"nll": (B, T), "set": name}``), reduced across processes; a
bin's value is the mean of its positions' mean NLL (docs/paper.md section 5), with bin edges
``int(linspace(0, T, B + 1))``. Logged on rank 0 at the weights' step as ``val/pos_nll/<set>/b<k>``
and an image ``val/pos_nll``, and written with its history to ``position_loss.json``; with
``bin_runs`` each bin is also its own small TensorBoard run
(:mod:`lit_sparse.callbacks.tensorboard`). On data whose labels are a few answers
(``datamodule.sparse_labels``: the recall tasks) it does nothing.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerFn

from lit_sparse.callbacks.images import lines_image, log_image
from lit_sparse.callbacks.run_dir import purge_step, run_dir, write_json
from lit_sparse.callbacks.tensorboard import SeriesRuns, write_layout
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.position_loss import PositionBinnedNLL, bin_edges

__all__ = ["PositionBinnedNLL", "PositionLoss", "bin_edges"]

FORMAT = "lit_sparse.position_loss/1"


class PositionLoss(pl.Callback):
    """Log the position-binned validation NLL of every held-out set.

    Args:
        n_bins: bins of position within the window (edges as docs/paper.md section 5).
        image: log an image of every set's bins at each validation.
        filename: JSON file written in the run directory (None: none).
        prefix: tag prefix (``<prefix>/<set>/b<k>``).
        bin_runs: with TensorBoard, also write each bin to its own run
            ``<run>/pos_nll/<first>-<last position>`` (tag ``<prefix>/<set>``): a colour
            and a name per bin in each set's chart, and a run per bin in the runs panel.
            Off: one run per training run; each set's chart holds its bins' tags.
    """

    def __init__(
        self,
        n_bins: int = 8,
        image: bool = True,
        filename: str | None = "position_loss.json",
        prefix: str = "val/pos_nll",
        bin_runs: bool = False,
    ):
        super().__init__()
        if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
            raise ConfigError(f"n_bins={n_bins!r}: expected an integer >= 1")
        self.n_bins, self.image, self.filename, self.prefix = n_bins, image, filename, prefix
        self.bin_runs = bin_runs
        self._series = SeriesRuns()
        self.metrics: dict[str, PositionBinnedNLL] = {}
        self.history: list[dict[str, Any]] = []
        self.latest: dict[str, list[float]] = {}
        self._checkpoint_step: int | None = None
        self._skipped = False

    def check_data(self, datamodule: Any) -> None:
        """ConfigError unless every bin gets a position: ``n_bins`` <= ``data.seq_len`` (the
        CLI asks before anything runs)."""
        seq_len = getattr(datamodule, "seq_len", None)
        if isinstance(seq_len, int) and seq_len < self.n_bins:
            raise ConfigError(
                f"PositionLoss(n_bins={self.n_bins}) needs at least {self.n_bins} positions per "
                f"window, but data.seq_len={seq_len}: lower the callback's n_bins to at most "
                f"{seq_len} or raise data.seq_len"
            )

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict.get("history", []))

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict
    ) -> None:
        # validate does not restore the step counter: remember the weights' training step
        self._checkpoint_step = checkpoint.get("global_step")

    def _step(self, trainer: pl.Trainer) -> int:
        if trainer.state.fn == TrainerFn.FITTING or self._checkpoint_step is None:
            return trainer.global_step
        return int(self._checkpoint_step)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _length(trainer: pl.Trainer, pl_module: pl.LightningModule) -> int:
        datamodule = getattr(trainer, "datamodule", None)
        length = getattr(datamodule, "seq_len", None)
        if length is None:
            length = pl_module.config.context_length
        return int(length)

    @staticmethod
    def _set_names(pl_module: pl.LightningModule) -> list[str]:
        return list(pl_module.val_set_names())

    def bin_run(self, edges: list[int], k: int) -> str:
        """The run of bin ``k`` inside the run's log folder: ``pos_nll/000-031`` (its first
        and last position, zero-padded so that TensorBoard lists the bins in order)."""
        width = len(str(edges[-1] - 1))
        return f"{self.prefix.rpartition('/')[2]}/{edges[k]:0{width}d}-{edges[k + 1] - 1:0{width}d}"

    def custom_scalar_charts(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict:
        """This callback's charts of the run's Custom Scalars layout: one per held-out set."""
        tail = "" if self.bin_runs else r"/b\d+"
        return {
            f"NLL by position: {name}": ["Multiline", [f"^{self.prefix}/{name}{tail}$"]]
            for name in self._set_names(pl_module)
        }

    def _log(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, sets: dict, step: int
    ) -> None:
        """One validation's bins (``{set: [value per bin]}``, None or nan: no value) as
        ``<prefix>/<set>/b<k>`` to every logger and, per bin, to its TensorBoard run."""
        finite = {
            name: {k: v for k, v in enumerate(bins) if v is not None and math.isfinite(v)}
            for name, bins in sets.items()
        }
        metrics = {
            f"{self.prefix}/{name}/b{k}": value
            for name, bins in finite.items()
            for k, value in bins.items()
        }
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        # the bins' own runs are the training run's chart; an evaluation's folder under
        # evals/ keeps the tags only (its own run: no stray line in the training's chart)
        if self.bin_runs and trainer.state.fn == TrainerFn.FITTING:
            edges = bin_edges(self._length(trainer, pl_module), self.n_bins)
            for name, bins in finite.items():
                runs = {self.bin_run(edges, k): value for k, value in bins.items()}
                self._series.log(trainer, runs, tag=f"{self.prefix}/{name}", step=step)

    # ------------------------------------------------------------------ hooks
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Resumed in place: a periodic checkpoint is saved before the validation at its
        step, so that validation is neither in the checkpoint's history nor run again. Take
        it back from the run's position_loss.json and write the entries the resume's purge
        hides (from the purge step on) to TensorBoard again."""
        write_layout(trainer, pl_module)
        purged = purge_step(trainer)
        if purged is None or not trainer.is_global_zero:
            return
        known = {entry["step"] for entry in self.history}
        saved = self._saved_history(trainer)
        missed = [
            e for e in saved if e.get("step") not in known and e["step"] <= trainer.global_step
        ]
        self.history = sorted(self.history + missed, key=lambda entry: entry["step"])
        for entry in self.history:
            if entry["step"] >= purged:
                self._log(trainer, pl_module, entry["sets"], entry["step"])

    def _saved_history(self, trainer: pl.Trainer) -> list[dict[str, Any]]:
        if not self.filename:
            return []
        try:
            saved = json.loads((run_dir(trainer) / self.filename).read_text())
            history = saved["history"]
            return [e for e in history if isinstance(e, dict) and isinstance(e.get("step"), int)]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._skipped = bool(getattr(trainer.datamodule, "sparse_labels", False))
        if self._skipped:  # answers at a few positions: no loss by position to bin
            self.metrics = {}
            return
        # every rank builds the same metrics in the same order (a rank may see no window of
        # a set: its zero states still take part in the reduction)
        length = self._length(trainer, pl_module)
        self.metrics = {
            name: PositionBinnedNLL(length, self.n_bins).to(pl_module.device)
            for name in self._set_names(pl_module)
        }

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if trainer.sanity_checking or not isinstance(outputs, dict) or "nll" not in outputs:
            return
        name = outputs.get("set") or self._set_names(pl_module)[dataloader_idx]
        if name in self.metrics:
            self.metrics[name].update(outputs["nll"])

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or self._skipped:
            return
        values: dict[str, list[float]] = {}
        windows: dict[str, int] = {}
        for name, metric in self.metrics.items():  # the same order on every rank
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*was called before the ``update``")
                bins = metric.compute()
            windows[name] = metric.windows
            metric.reset()
            values[name] = [float(v) for v in bins.cpu()]
        self.latest = values
        entry = {
            "step": self._step(trainer),
            "sets": {n: [v if math.isfinite(v) else None for v in b] for n, b in values.items()},
            "windows": windows,
        }
        if self.history and self.history[-1]["step"] == entry["step"]:
            self.history[-1] = entry
        else:
            self.history.append(entry)
        if not trainer.is_global_zero:
            return
        # logged at the optimizer step of the weights (Lightning's own val/ metrics carry the
        # step before: it counts the step after validation); validate, test and extrapolate
        # at the evaluated checkpoint's step, not at 0
        self._log(trainer, pl_module, values, entry["step"])
        self._series.flush()
        edges = bin_edges(self._length(trainer, pl_module), self.n_bins)
        if self.image and values:
            centers = [(a + b - 1) / 2 for a, b in zip(edges, edges[1:], strict=False)]
            image = lines_image(
                centers,
                values,
                f"validation NLL by position (step {entry['step']})",
                "position in window",
                "mean NLL",
            )
            log_image(trainer, self.prefix, image, entry["step"])
        if self.filename:
            write_json(
                run_dir(trainer) / self.filename,
                {
                    "format": FORMAT,
                    "length": self._length(trainer, pl_module),
                    "n_bins": self.n_bins,
                    "edges": edges,
                    "step": entry["step"],
                    "sets": entry["sets"],
                    "windows": windows,
                    "history": self.history,
                },
            )

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._series.close()
