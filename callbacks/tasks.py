"""The registered choice tasks (LEGO, RULER variable tracking, ...) at each validation:
forced-choice accuracy, the chance rate and the share of items given the most common answer.

Items come from :mod:`lit_sparse.tasks` (built once, from ``seed``), encoded with the
datamodule's tokenizer. Rank 0 scores them after each validation (not the sanity check), logs
``tasks/<task>/accuracy``, ``.../chance``, ``.../same_answer`` and ``.../accuracy_<group>`` at
the step of the weights, and writes the history to ``tasks.json`` in the run directory.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerFn

from lit_sparse.callbacks.run_dir import run_dir, write_json
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.forced_choice import TaskResult
from lit_sparse.tasks.choice import ChoiceTask
from lit_sparse.tasks.registry import get_task, list_tasks

__all__ = ["TaskAccuracy", "choice_tasks"]

FORMAT = "lit_sparse.tasks/1"


def choice_tasks(names: list[str] | None, per_group: int, seed: int) -> dict[str, ChoiceTask]:
    """The registered choice tasks ``names`` (None: every one), built with their items."""
    choices = list_tasks("choice")
    tasks = {}
    for name in choices if names is None else names:
        if name not in choices:
            raise ConfigError(f"tasks: {name!r} is not a choice task; registered: {choices}")
        tasks[name] = get_task(name)(per_group=per_group, seed=seed)
    return tasks


def encoder(tokenizer: Any):
    """str -> token ids, from a ``tokenizers.Tokenizer`` (or anything with ``encode`` that
    returns ids or an object with ``.ids``)."""

    def encode(text: str) -> list[int]:
        encoded = tokenizer.encode(text)
        return list(getattr(encoded, "ids", encoded))

    return encode


class TaskAccuracy(pl.Callback):
    """Score the registered choice tasks after each validation.

    Args:
        tasks: which tasks (default: every registered choice task: ``lego``, ``ruler_vt``).
        per_group: items per chain length / number of hops (the paper: 120).
        seed: seed of the items.
        batch_size: sequences per forward pass.
        filename: JSON file in the run directory (None: none).
        prefix: tag prefix of the logged metrics.
    """

    def __init__(
        self,
        tasks: list[str] | None = None,
        per_group: int = 120,
        seed: int = 0,
        batch_size: int = 64,
        filename: str | None = "tasks.json",
        prefix: str = "tasks",
    ):
        super().__init__()
        self.choice_tasks = choice_tasks(tasks, per_group, seed)
        self.tasks = list(self.choice_tasks)
        self.batch_size, self.filename, self.prefix = batch_size, filename, prefix
        self.history: list[dict[str, Any]] = []
        self.latest: dict[str, TaskResult] = {}
        self._checkpoint_step: int | None = None

    def state_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict.get("history", []))

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        self._checkpoint_step = checkpoint.get("global_step")

    def score(self, pl_module: pl.LightningModule, tokenizer: Any) -> dict[str, TaskResult]:
        """Every task's result for ``pl_module``'s model now."""
        model = getattr(pl_module, "model", pl_module)
        encode = encoder(tokenizer)
        return {
            name: task.score(model, encode, batch_size=self.batch_size)
            for name, task in self.choice_tasks.items()
        }

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        tokenizer = getattr(trainer.datamodule, "tokenizer", None)
        if tokenizer is None:
            raise RuntimeError("TaskAccuracy needs a datamodule with a tokenizer")
        with trainer.precision_plugin.forward_context():
            self.latest = self.score(pl_module, tokenizer)
        fitting = trainer.state.fn == TrainerFn.FITTING
        step = (
            trainer.global_step
            if fitting or self._checkpoint_step is None
            else int(self._checkpoint_step)
        )
        metrics: dict[str, float] = {}
        for result in self.latest.values():
            metrics.update(result.metrics(self.prefix))
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        entry = {"step": step, "tasks": {k: v.as_dict() for k, v in self.latest.items()}}
        if self.history and self.history[-1]["step"] == step:
            self.history[-1] = entry
        else:
            self.history.append(entry)
        if self.filename:
            write_json(
                run_dir(trainer) / self.filename,
                {"format": FORMAT, **entry, "history": self.history},
            )
