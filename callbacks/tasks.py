"""LEGO and RULER variable tracking at each validation: forced-choice accuracy, the chance
rate and the share of items given the most common answer (1.0: always the same answer).

Items come from :mod:`lit_sparse.evaluation.lego` and :mod:`lit_sparse.evaluation.ruler`
(built once, from ``seed``); the text is encoded with the datamodule's tokenizer
(``trainer.datamodule.tokenizer``, a ``tokenizers.Tokenizer``). Rank 0 scores them after each
validation (not the sanity check), logs ``tasks/<task>/accuracy``, ``.../chance``,
``.../same_answer`` and ``.../accuracy_<group>`` at the step of the weights, and writes the
history to ``tasks.json`` in the run directory.
"""

from __future__ import annotations

from typing import Any, Literal

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerFn

from lit_sparse.callbacks.run_dir import run_dir, write_json
from lit_sparse.errors import ConfigError
from lit_sparse.evaluation.forced_choice import ChoiceItem, TaskResult, score_task
from lit_sparse.evaluation.lego import lego_items
from lit_sparse.evaluation.ruler import ruler_vt_items

__all__ = ["TASKS", "TaskAccuracy", "task_items"]

FORMAT = "lit_sparse.tasks/1"
TASKS = ("lego", "ruler_vt")
GROUP_LABELS = {"lego": "chain length", "ruler_vt": "hops"}


def task_items(task: str, per_group: int = 120, seed: int = 0) -> list[ChoiceItem]:
    """The items of ``task`` (``lego``: chain lengths 2/3/4; ``ruler_vt``: 2/3/4 hops)."""
    if task == "lego":
        return lego_items(per_length=per_group, seed=seed)
    if task == "ruler_vt":
        return ruler_vt_items(per_hops=per_group, seed=seed)
    raise ConfigError(f"task={task!r}: unknown task; allowed: {', '.join(TASKS)}")


def encoder(tokenizer: Any):
    """str -> token ids, from a ``tokenizers.Tokenizer`` (or anything with ``encode`` that
    returns ids or an object with ``.ids``)."""

    def encode(text: str) -> list[int]:
        encoded = tokenizer.encode(text)
        return list(getattr(encoded, "ids", encoded))

    return encode


class TaskAccuracy(pl.Callback):
    """Score LEGO and RULER variable tracking after each validation.

    Args:
        tasks: which tasks (``lego``, ``ruler_vt``).
        per_group: items per chain length / number of hops (the paper: 120).
        seed: seed of the items.
        batch_size: sequences per forward pass.
        filename: JSON file in the run directory (None: none).
        prefix: tag prefix of the logged metrics.
    """

    def __init__(
        self,
        tasks: list[Literal["lego", "ruler_vt"]] | None = None,
        per_group: int = 120,
        seed: int = 0,
        batch_size: int = 64,
        filename: str | None = "tasks.json",
        prefix: str = "tasks",
    ):
        super().__init__()
        self.tasks = list(TASKS) if tasks is None else list(tasks)
        if isinstance(per_group, bool) or not isinstance(per_group, int) or per_group < 1:
            raise ConfigError(f"per_group={per_group!r}: expected an integer >= 1")
        self.items = {task: task_items(task, per_group, seed) for task in self.tasks}
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
            task: score_task(
                task, GROUP_LABELS[task], model, encode, items, batch_size=self.batch_size
            )
            for task, items in self.items.items()
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
