"""The LightningModule: next-token loss, AdamW, warmup + cosine, held-out validation; with sparse
labels (recall tasks) loss and head at the labelled positions only, and :class:`RecallAccuracy`."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.trainer.states import TrainerFn
from torch import Tensor, nn

from lit_sparse import sharding
from lit_sparse.attention import AttentionPlugin, SlotPattern, build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.errors import ConfigError, NonFiniteLossError
from lit_sparse.kernels import compiled
from lit_sparse.kernels.denormals import flushed_denormals
from lit_sparse.legacy import translate
from lit_sparse.metrics import IGNORE_INDEX, RecallAccuracy, TokenNLL, labelled_counts
from lit_sparse.model import LanguageModel, token_nll
from lit_sparse.optimizers import OPTIMIZERS, eight_bit_adamw
from lit_sparse.schedule import warmup_cosine

FLOAT32_MAX = float(torch.finfo(torch.float32).max)

RESUMABLE_HPARAMS = tuple("lr min_lr_ratio warmup_steps max_steps weight_decay betas eps".split())
"""Optimizer and schedule values a resume may change; they apply from the resume step."""

PAPER_MODEL = ModelConfig()
"""The paper's 60.85M-parameter shape (never mutated: a shared default)."""


def _are_betas(betas: Any) -> bool:
    """Whether ``betas`` are AdamW's two decay rates, each in [0, 1) (torch's own rule)."""
    return (
        isinstance(betas, (list, tuple))
        and len(betas) == 2
        and all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in betas)
        and all(0 <= b < 1 for b in betas)
    )


def _shown(value: Any) -> Any:
    """A tuple as the list a command line or config file writes (so the two compare equal)."""
    return list(value) if isinstance(value, tuple) else value


class LitLanguageModel(pl.LightningModule):
    """A decoder-only language model with a pluggable attention pattern, trained on next tokens.

    Validation logs a token-weighted NLL per held-out set (``val/loss/<set>``,
    ``val/ppl/<set>``), their mean ``val/loss`` and ``val/ppl`` = exp(``val/loss``), at the
    weights' optimizer step; ``test`` logs ``test/*``. ``validation_step`` returns the
    per-position NLL (B, T)."""

    def __init__(
        self,
        arch: ModelConfig = PAPER_MODEL,
        attention: AttentionPlugin | None = None,
        lr: float = 3e-4,
        min_lr_ratio: float = 0.1,
        warmup_steps: int = 300,
        max_steps: int = 13_000,
        weight_decay: float = 0.1,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        tokens_per_step: int | None = None,
        optimizer: Literal["adamw", "adamw8bit"] = "adamw",
        compile: bool = False,
    ):
        """
        Args:
            arch: the transformer's shape (paper defaults; vocab_size and context_length are
                linked from the data by the CLI).
            attention: the attention plugin (default dense).
            lr: peak learning rate, also for the alpha parameters.
            min_lr_ratio: the cosine ends at lr * min_lr_ratio.
            warmup_steps: linear warmup length in optimizer steps.
            max_steps: where the cosine ends (the CLI links trainer.max_steps here).
            weight_decay: AdamW decay on tensors with >= 2 dims (not norms, not alpha).
            betas: AdamW betas.
            eps: AdamW epsilon.
            tokens_per_step: if set, fit refuses to start unless micro-batch x accumulation x
                processes x length equals it (the paper: 32,768).
            optimizer: "adamw" (torch's) or "adamw8bit" (bitsandbytes', the ``bnb`` extra);
                same betas, decay and schedule.
            compile: train through torch.compile (compiles 20-40 s at the first step).
        """
        super().__init__()
        arch = ModelConfig.from_dict(arch) if isinstance(arch, Mapping) else arch
        attention = build_attention(attention)
        for name, value, ok, allowed in (
            ("lr", lr, lr > 0, "> 0"),
            ("lr", lr, lr <= FLOAT32_MAX, f"at most {FLOAT32_MAX:.3g} (the optimizer's float32)"),
            ("min_lr_ratio", min_lr_ratio, 0 <= min_lr_ratio <= 1, "in [0, 1]"),
            ("warmup_steps", warmup_steps, warmup_steps >= 0, ">= 0"),
            ("max_steps", max_steps, max_steps > 0, "> 0"),
            ("weight_decay", weight_decay, weight_decay >= 0, ">= 0"),
            ("betas", _shown(betas), _are_betas(betas), "two numbers in [0, 1) (AdamW's decays)"),
            ("eps", eps, eps >= 0, ">= 0"),
            ("optimizer", optimizer, optimizer in OPTIMIZERS, f"one of {', '.join(OPTIMIZERS)}"),
        ):
            if not ok:
                raise ConfigError(f"model.{name}={value!r}: must be {allowed}")
        if optimizer == "adamw8bit":
            eight_bit_adamw()  # refuses now, before any data or model is built
        self.save_hyperparameters()
        # checkpoints hold plain values, so loading needs neither pickled classes nor the CLI
        self.hparams["arch"], self.hparams["attention"] = arch.to_dict(), attention.to_config()
        self.model = LanguageModel(arch, attention)
        self._train_features = None  # the compiled forward, made at the first step
        self.val_nll = nn.ModuleDict()
        self.val_acc = nn.ModuleDict()
        self._sparse_labels = False
        self._evaluating = contextlib.ExitStack()

    def configure_model(self) -> None:
        """Under a device mesh (configs/strategy/fsdp2.yaml) shard each block and the rest."""
        if self.device_mesh is None or sharding.is_sharded(self.model):
            return
        mesh = sharding.data_parallel_mesh(self.device_mesh)
        policy = sharding.mixed_precision(self.trainer.precision, mesh.device_type)
        sharding.shard_model(self.model, self.model.blocks, mesh, policy)

    @property
    def config(self) -> ModelConfig:
        return self.model.config

    def forward(self, idx: Tensor) -> Tensor:
        return self.model(idx)

    def token_nll(self, x: Tensor, y: Tensor) -> Tensor:
        """Per-token NLL (B, T) of targets y given inputs x (:func:`model.token_nll`)."""
        return token_nll(self.model(x), y)

    def labelled_logits(self, x: Tensor, y: Tensor, features=None) -> tuple[Tensor, Tensor]:
        """Logits (N, V) at the N labelled positions of y (B, T), computed there only; the mask."""
        mask = y != IGNORE_INDEX
        hidden = (features or self.model.features)(x)
        return self.model.head(hidden[mask]), mask  # (N, d) -> (N, V)

    # ----------------------------------------------------------------- training
    def on_fit_start(self) -> None:
        trainer, datamodule = self.trainer, self.trainer.datamodule
        batch = getattr(datamodule, "batch_size", None)
        if self.hparams.tokens_per_step is None or batch is None:
            return
        tokens = batch * trainer.accumulate_grad_batches * trainer.world_size * datamodule.seq_len
        if tokens != self.hparams.tokens_per_step:
            raise ConfigError(
                f"model.tokens_per_step={self.hparams.tokens_per_step} but data.batch_size "
                f"({batch}) x trainer.accumulate_grad_batches ({trainer.accumulate_grad_batches}) "
                f"x processes ({trainer.world_size}) x data.seq_len ({datamodule.seq_len}) = "
                f"{tokens}; change accumulate_grad_batches to keep the paper's batch"
            )

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        features = self._training_features()
        if self._sparse_labels:  # the mean over the labelled positions only
            logits, mask = self.labelled_logits(x, y, features)
            loss = F.cross_entropy(logits.float(), y[mask])
        else:
            loss = token_nll(self.model.head(features(x)), y).mean()
        if not torch.isfinite(loss):  # one host sync per micro-batch; stops before any update
            raise NonFiniteLossError(self._non_finite_message(loss, batch_idx))
        self.log("train/loss", loss, prog_bar=True)
        return loss

    def _training_features(self):
        """The features for training, compiled on first use with ``compile`` (still picklable)."""
        if not self.hparams.get("compile"):
            return self.model.features
        if self._train_features is None:
            self._train_features = torch.compile(self.model.features)
        return self._train_features

    def _non_finite_message(self, loss: Tensor, batch_idx: int) -> str:
        callback = self.trainer.checkpoint_callback if self._trainer else None
        last = callback and (callback.last_model_path or callback.best_model_path)
        stopped = (
            f"training stopped: the loss is {loss.item()} at optimizer step {self.global_step} "
            f"(micro-batch {batch_idx})"
        )
        if not last:
            return (
                f"{stopped}; no checkpoint was saved yet: start the run again, e.g. with a "
                "lower --model.lr"
            )
        path = Path(last)
        run = path.parent.parent if path.parent.name == "checkpoints" else path
        return (
            f"{stopped}; the last good checkpoint is {last}; resume from it with "
            f"--ckpt_path {run}, e.g. with a lower --model.lr (it applies from that step)"
        )

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path, *args: Any, **kwargs: Any):  # type: ignore[override]
        """Lightning's; a checkpoint of an earlier version is read in today's form, with a note."""
        if "attention" not in kwargs and Path(str(checkpoint_path)).is_file():
            saved = torch.load(checkpoint_path, map_location="cpu", mmap=True, weights_only=False)
            attention = (saved.get("hyper_parameters") or {}).get("attention")
            if isinstance(attention, Mapping):
                where = f"{checkpoint_path} (hyper_parameters)"
                kwargs["attention"] = translate({"attention": dict(attention)}, where)["attention"]
        return super().load_from_checkpoint(checkpoint_path, *args, **kwargs)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        saved = checkpoint.get("hyper_parameters") or {}
        self._resumed_hparams = {k: saved[k] for k in RESUMABLE_HPARAMS if k in saved}
        # validate and test leave the step counter at 0: their metrics go at this step
        self._checkpoint_step = checkpoint.get("global_step")

    def on_train_start(self) -> None:
        """Apply a resume's changed RESUMABLE_HPARAMS (restored states keep the checkpoint's)."""
        saved, hp = getattr(self, "_resumed_hparams", None), self.hparams
        self._resumed_hparams = None
        if not saved or all(_shown(saved[k]) == _shown(hp.get(k)) for k in saved):
            return
        optimizer, config = self.trainer.optimizers[0], self.trainer.lr_scheduler_configs[0]
        for i, group in enumerate(optimizer.param_groups):
            group["betas"], group["eps"] = tuple(hp.betas), hp.eps
            group["weight_decay"] = hp.weight_decay if i == 0 else 0.0
            group["initial_lr"] = hp.lr
        # a LambdaLR anew at this step: its base the new lr, its lambda reads the new rest
        old = config.scheduler
        config.scheduler = type(old)(optimizer, old.lr_lambdas, last_epoch=old.last_epoch - 1)

    def configure_optimizers(self):
        decay = [p for p in self.parameters() if p.requires_grad and p.ndim >= 2]
        no_decay = [p for p in self.parameters() if p.requires_grad and p.ndim < 2]
        hp = self.hparams
        groups = [
            {"params": decay, "weight_decay": hp.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        options = {"lr": hp.lr, "betas": tuple(hp.betas), "eps": hp.eps}
        if hp.get("optimizer", "adamw") == "adamw8bit":
            optimizer = eight_bit_adamw(self.device)(groups, **options)
        else:
            optimizer = torch.optim.AdamW(groups, **options)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda step: warmup_cosine(step, hp.warmup_steps, hp.max_steps, hp.min_lr_ratio),
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # --------------------------------------------------------------- validation
    def val_set_names(self) -> list[str]:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        return list(getattr(datamodule, "val_set_names", None) or ["val"])

    def on_validation_start(self) -> None:
        # sharded: every process holds the whole weights while it scores its own windows
        self._evaluating.enter_context(sharding.gathered(self.model))

    on_test_start = on_validation_start

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer else None
        self._sparse_labels = bool(getattr(datamodule, "sparse_labels", False))
        if self._trainer is not None and self.trainer.strategy.root_device.type == "cpu":
            self._build_cpu_kernel()
        for name in self.val_set_names():
            if name not in self.val_nll:
                self.val_nll[name] = TokenNLL()
            if self._sparse_labels and name not in self.val_acc:
                self.val_acc[name] = RecallAccuracy()

    def configure_callbacks(self) -> list[pl.Callback]:
        """Subnormal floats flushed while a CPU trainer runs (lit_sparse.kernels.denormals)."""
        return [FlushedSubnormals()]

    def _build_cpu_kernel(self) -> None:
        """Build the CPU kernel (a minute, once) with its own message, before the progress bar."""
        if any(isinstance(m, SlotPattern) for m in self.model.modules()):
            compiled.available()

    def validation_step(self, batch, batch_idx: int, dataloader_idx: int = 0) -> dict[str, Any]:
        x, y = batch
        name = self.val_set_names()[dataloader_idx]
        if self._sparse_labels:  # the labelled positions only, and their accuracy
            logits, mask = self.labelled_logits(x, y)
            labelled = F.cross_entropy(logits.float(), y[mask], reduction="none")
            self.val_nll[name].update(labelled)
            self.val_acc[name].update(*labelled_counts(logits, mask, y[mask]))
            nll = torch.zeros(mask.shape, dtype=labelled.dtype, device=labelled.device)
            nll[mask] = labelled
        else:
            nll = self.token_nll(x, y)
            self.val_nll[name].update(nll)
        return {"nll": nll.detach(), "set": name}

    test_step = validation_step  # the held-out sets scored as validate does, logged as test/*

    def on_validation_epoch_end(self) -> None:
        self._log_sets("val")

    def on_test_epoch_end(self) -> None:
        self._log_sets("test")

    def _log_sets(self, prefix: str) -> None:
        # every process computes every set in the same order: the sums reduce across ranks
        losses = []
        for name in self.val_set_names():
            metric = self.val_nll[name]
            losses.append(loss := metric.compute())
            metric.reset()
            self.log(f"{prefix}/loss/{name}", loss)
            self.log(f"{prefix}/ppl/{name}", loss.exp())
        if losses:
            stacked = torch.stack(losses)
            # exp of the mean loss (what Lightning and HF users read as ppl), not the mean ppl
            self.log(f"{prefix}/loss", stacked.mean(), prog_bar=True)
            self.log(f"{prefix}/ppl", stacked.mean().exp(), prog_bar=True)
        if self._sparse_labels:
            self._log_accuracy(prefix)
        fitting = self.trainer.state.fn == TrainerFn.FITTING
        step = self.trainer.global_step if fitting else getattr(self, "_checkpoint_step", None)
        if step is not None:
            # the weights' optimizer step, as the callbacks tag this validation (Lightning's
            # is one earlier; validate and test log 0): the x value the loggers get
            self.log("step", float(step), sync_dist=True)

    def _log_accuracy(self, prefix: str) -> None:
        """``<prefix>/acc/<set>``, ``<prefix>/exact/<set>`` and the mean ``<prefix>/acc``."""
        accuracies = []
        for name in self.val_set_names():
            metric = self.val_acc[name]
            result = metric.compute()
            metric.reset()
            if int(result["examples"]) == 0:
                continue
            self.log(f"{prefix}/acc/{name}", result["accuracy"])
            self.log(f"{prefix}/exact/{name}", result["exact"])
            accuracies.append(result["accuracy"])
        if accuracies:
            self.log(f"{prefix}/acc", torch.stack(accuracies).mean(), prog_bar=True)

    def on_validation_end(self) -> None:
        self._evaluating.close()  # after the callbacks' hooks: their evaluations too
        # "step" served the loggers (and ModelCheckpoint at this validation); a later
        # checkpoint must name its own step, not this one's
        if self._trainer is not None:
            self.trainer.callback_metrics.pop("step", None)

    on_test_end = on_validation_end


class FlushedSubnormals(pl.Callback):
    """Subnormals flushed on a CPU trainer from setup to teardown, the process's mode restored
    after (:func:`lit_sparse.kernels.denormals.flushed_denormals`); also when the run raises,
    where Lightning skips every teardown hook."""

    def __init__(self) -> None:
        self._mode = contextlib.ExitStack()

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if trainer.strategy.root_device.type == "cpu":
            self._mode.enter_context(flushed_denormals())

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._mode.close()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception) -> None:
        self._mode.close()
