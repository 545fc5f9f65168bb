"""``TextDataModule``: the weighted text mixture, its token cache, and the data loaders.

``__init__`` loads the tokenizer so ``vocab_size`` is known before the model is built;
``prepare_data`` (local rank 0) tokenizes what the cache lacks; ``setup`` maps the files."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch.utils.data import DataLoader

from lit_sparse.data.checks import check_int
from lit_sparse.data.embedded import embedded_manifest
from lit_sparse.data.mixture import MixtureWindows
from lit_sparse.data.sources import SourceConfig
from lit_sparse.data.token_cache import CachePlan, TokenFile, build_source, check_part, make_plan
from lit_sparse.data.tokenizer import load_tokenizer, resolve_vocab_size
from lit_sparse.data.windows import HeldOutWindows, num_windows, rank_of
from lit_sparse.errors import CheckpointError, ConfigError

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$LIT_SPARSE_CACHE`` if set, else ``~/.cache/lit_sparse``."""
    env = os.environ.get("LIT_SPARSE_CACHE", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lit_sparse"


def _training_tokens_known(plan: CachePlan) -> tuple[int, str] | None:
    """A source's training tokens known before tokenizing (cached, budget, or an embedded corpus's
    bytes plus one per document) with "" (exact) or "at most " (a bound); None when unknown."""
    if "train" not in plan.parts:
        return None
    cached = check_part(plan, "train", verify_checksum=False)
    if isinstance(cached, TokenFile):
        return cached.num_tokens, ""
    src = plan.source
    if plan.max_tokens is not None:
        return plan.max_tokens, "at most "
    if src.path.startswith("embedded:") and src.text_template is None:
        split = embedded_manifest()["corpora"].get(src.path.removeprefix("embedded:"), {})
        train = split.get("splits", {}).get("train")
        if train:
            return train["utf8_bytes"] + train["documents"], "at most "
    return None


def embedded_sources() -> list[SourceConfig]:
    """The embedded default mixture: Shakespeare 65 %, synthetic math 35 % of tokens; held-out sets
    ``shakespeare`` (four whole plays) and ``math`` (questions never seen in training)."""
    return [
        SourceConfig(name="shakespeare", path="embedded:shakespeare", weight=0.65),
        SourceConfig(name="math", path="embedded:math", weight=0.35),
    ]


def checked_seq_len(seq_len: Any) -> int:
    """data.seq_len, validated before it becomes the model's context length."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
        raise ConfigError(f"data.seq_len={seq_len!r}: must be a positive integer")
    return seq_len


def _check_unique(field: str, names: list[str], message: str) -> None:
    """One ConfigError line, ``message``, naming the first of ``names`` that repeats."""
    repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if repeated is not None:
        raise ConfigError(f"{field}={repeated!r}: {message}")


class _TrainLoader(DataLoader):
    """The training DataLoader, restarting at the consumed-sample count on every ``iter()``."""

    def __init__(self, dataset: MixtureWindows, datamodule: TextDataModule, **kwargs: Any) -> None:
        super().__init__(dataset, batch_size=None, **kwargs)
        self._datamodule = datamodule

    def __iter__(self) -> Iterator:
        dm = self._datamodule
        self.dataset.start_sample = dm._samples_consumed  # workers copy the dataset after this
        for batch in super().__iter__():
            if dm.trainer is None:  # under a Trainer, on_before_batch_transfer counts
                dm._samples_consumed += int(batch[0].shape[0])
            yield batch


class TextDataModule(pl.LightningDataModule):
    """A weighted mixture of text sources, tokenized into a memory-mapped token cache.

    Args:
        sources: the mixture (see :class:`SourceConfig`); None: the embedded offline default.
        tokenizer: ``embedded`` (8192 ids), a tokenizer.json path or folder, or a hub repo name.
        seq_len: positions per training window (the model's context).
        batch_size: windows per micro-batch and process.
        vocab_size: the model's vocabulary, >= the tokenizer's; None: its size rounded up to 64.
        val_windows: at most this many validation windows per held-out set; None = all.
        cache_dir: token cache folder; None = ``$LIT_SPARSE_CACHE`` or ``~/.cache/lit_sparse``.
        num_workers: DataLoader worker processes per loader.
        seed: seed of the training sample stream.
        token_budget: training tokens, shared by weight among sources without ``max_tokens``.
    """

    def __init__(
        self,
        sources: list[SourceConfig] | None = None,
        tokenizer: str = "embedded",
        seq_len: int = 1024,
        batch_size: int = 8,
        vocab_size: int | None = None,
        val_windows: int | None = None,
        cache_dir: str | None = None,
        num_workers: int = 0,
        seed: int = 42,
        token_budget: int | None = None,
    ) -> None:
        super().__init__()
        self.seq_len = check_int("seq_len", seq_len)
        self.batch_size = check_int("batch_size", batch_size)
        self.val_windows = check_int("val_windows", val_windows, allow_none=True)
        self.num_workers = check_int("num_workers", num_workers, low=0)
        self.token_budget = check_int("token_budget", token_budget, allow_none=True)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"seed={seed!r}: expected an integer")
        sources = embedded_sources() if sources is None else list(sources)
        if not sources:
            raise ConfigError(
                "sources=[]: expected at least one source (or None for the embedded default)"
            )
        for i, src in enumerate(sources):
            if not isinstance(src, SourceConfig):
                raise ConfigError(f"sources[{i}]={src!r}: expected a SourceConfig")
        names = [s.name for s in sources]
        _check_unique("name", names, "two sources share this name; names must be unique")
        held = [s.held_out_name for s in sources if s.has_val]
        unique = "held-out names must be unique"
        _check_unique("val_name", held, f"two sources have a held-out set of this name; {unique}")
        total_weight = sum(s.weight for s in sources)
        if total_weight <= 0:
            raise ConfigError(
                f"weights={[s.weight for s in sources]}: at least one source needs "
                "a weight > 0 (weights are training token shares)"
            )
        self.sources = sources
        self.tokenizer_spec = tokenizer
        self.seed = seed
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()

        self._tok = load_tokenizer(tokenizer)
        self._vocab_size = resolve_vocab_size(vocab_size, self._tok.size)
        self._plans: list[CachePlan] = [
            make_plan(s, self._tok, self.cache_dir, self._budget(s, total_weight)) for s in sources
        ]
        self._train: list[tuple[TokenFile, float]] | None = None
        self._val: dict[str, TokenFile] | None = None
        for plan in self._plans:  # now, not after setup: before a run folder is made
            known = _training_tokens_known(plan)
            if known is not None and known[0] < seq_len + 1:
                raise ConfigError(
                    f"data.seq_len={seq_len}: source {plan.source.name!r} has {known[1]}"
                    f"{known[0]:,} training tokens, fewer than seq_len + 1 = {seq_len + 1:,} "
                    "(a window holds seq_len + 1 tokens); lower data.seq_len"
                )
        self._samples_consumed = 0

    @classmethod
    def model_vocab_size(
        cls, tokenizer: str = "embedded", vocab_size: int | None = None, **init_args: Any
    ) -> int:
        """The model vocabulary these init args imply (the CLI's parse-time links): ``vocab_size``
        without a tokenizer (so a config parses offline), else the tokenizer's size rounded up."""
        if vocab_size is not None:
            return check_int("vocab_size", vocab_size)
        return resolve_vocab_size(None, load_tokenizer(tokenizer).size)

    @property
    def vocab_size(self) -> int:
        """The model's vocabulary size (available right after ``__init__``)."""
        return self._vocab_size

    @property
    def tokenizer(self):
        """The loaded ``tokenizers.Tokenizer`` (e.g. to decode batches in a notebook)."""
        return self._tok.tokenizer

    @property
    def tokenizer_size(self) -> int:
        """Ids the tokenizer can emit (``vocab_size`` is this, padded)."""
        return self._tok.size

    @property
    def eos_token_id(self) -> int:
        """The document separator's id."""
        return self._tok.eos_id

    @property
    def val_set_names(self) -> list[str]:
        """Names of the held-out sets, in the order of ``val_dataloader()``'s loaders."""
        return [s.held_out_name for s in self.sources if s.has_val]

    @property
    def samples_consumed(self) -> int:
        """Training samples this rank has consumed (the resume position)."""
        return self._samples_consumed

    def _budget(self, src: SourceConfig, total_weight: float) -> int | None:
        if src.max_tokens is not None:
            return src.max_tokens
        if self.token_budget is None or not src.has_train:
            return None
        return max(1, math.ceil(self.token_budget * src.weight / total_weight))

    def _ensure(
        self, plan: CachePlan, verify_checksum: bool, may_build: bool
    ) -> dict[str, TokenFile]:
        found = {p: check_part(plan, p, verify_checksum) for p in plan.parts}
        reasons = {p: r for p, r in found.items() if isinstance(r, str)}
        if not reasons:
            log.debug("source %r: token cache hit (%s)", plan.source.name, plan.stem.name)
            return found  # type: ignore[return-value]
        why = "; ".join(f"{p}: {r}" for p, r in reasons.items())
        if not may_build:
            raise RuntimeError(
                f"token cache of source {plan.source.name!r} is not usable in setup ({why}; "
                f"{plan.stem}). prepare_data should have built it: rerun, or delete the files "
                "to force a rebuild"
            )
        if any(r != "not cached" for r in reasons.values()):
            log.warning("source %r: rebuilding token cache (%s)", plan.source.name, why)
        return build_source(plan, self._tok)

    def prepare_data(self) -> None:
        """Tokenize every source not yet in the cache (once per node; checksums verified)."""
        for plan in self._plans:
            self._ensure(plan, verify_checksum=True, may_build=True)

    def setup(self, stage: str | None = None) -> None:
        """Validate and map the cached token files (every process)."""
        if self._train is not None:
            return
        _, world_size = rank_of(self.trainer)
        train: list[tuple[TokenFile, float]] = []
        val: dict[str, TokenFile] = {}
        for plan in self._plans:
            files = self._ensure(plan, verify_checksum=False, may_build=world_size == 1)
            src = plan.source
            if (tf := files.get("train")) is not None:
                if tf.num_tokens < self.seq_len + 1:
                    raise ConfigError(
                        f"source {src.name!r} has {tf.num_tokens} training tokens, "
                        f"fewer than seq_len + 1 = {self.seq_len + 1}"
                    )
                train.append((tf, src.weight))
            if (tf := files.get("val")) is not None:
                if num_windows(tf.num_tokens + 1, self.seq_len) == 0:  # + 1: the end-of-text prefix
                    raise ConfigError(
                        f"held-out set {src.held_out_name!r} has {tf.num_tokens} "
                        f"tokens, not one window of seq_len={self.seq_len}"
                    )
                val[src.held_out_name] = tf
        self._train, self._val = train, val

    def _require_setup(self) -> None:
        if self._train is None:
            raise RuntimeError("call setup() (after prepare_data()) before asking for loaders")

    def _loader_kwargs(self) -> dict[str, Any]:
        return {"num_workers": self.num_workers, "pin_memory": torch.cuda.is_available()}

    def train_dataloader(self) -> DataLoader:
        """Endless (x, y) LongTensor batches (batch_size, seq_len) of this rank's stream."""
        self._require_setup()
        rank, _ = rank_of(self.trainer)
        files, weights = [tf for tf, _ in self._train], [w for _, w in self._train]
        dataset = MixtureWindows(
            files, weights, self.seq_len, self.batch_size, self.seed, rank, self._samples_consumed
        )
        return _TrainLoader(dataset, self, **self._loader_kwargs())

    def _span(self, tf: TokenFile) -> int:
        """Predicted tokens covered by the validation windows at the training length."""
        count = num_windows(tf.num_tokens + 1, self.seq_len)  # + 1: the end-of-text prefix
        if self.val_windows is not None:
            count = min(count, self.val_windows)
        return count * self.seq_len

    def _held_out(self, set_name: str) -> TokenFile:
        self._require_setup()
        if set_name not in self._val:
            raise ConfigError(
                f"set_name={set_name!r}: unknown held-out set; allowed: "
                f"{', '.join(self.val_set_names)}"
            )
        return self._val[set_name]

    def val_windows_at(
        self, length: int, set_name: str, batch_size: int | None = None
    ) -> DataLoader:
        """This rank's non-overlapping windows of ``length`` over the validation windows' tokens
        (after an end-of-text prefix); ``batch_size`` defaults to about the validation batch's."""
        check_int("length", length)
        check_int("batch_size", batch_size, allow_none=True)
        tf = self._held_out(set_name)
        count = num_windows(tf.num_tokens + 1, length, span=self._span(tf))
        if count == 0:
            raise ConfigError(
                f"length={length}: held-out set {set_name!r} covers "
                f"{self._span(tf)} tokens, not one window of this length"
            )
        if batch_size is None:
            batch_size = max(1, self.batch_size * self.seq_len // length)
        rank, world_size = rank_of(self.trainer)
        dataset = HeldOutWindows(tf, length, count, batch_size, rank, world_size, self._tok.eos_id)
        return DataLoader(dataset, batch_size=None, **self._loader_kwargs())

    def val_dataloader(self) -> list[DataLoader]:
        """One loader per held-out set (order: ``val_set_names``), fixed windows."""
        return [self.val_windows_at(self.seq_len, name) for name in self.val_set_names]

    def test_dataloader(self) -> list[DataLoader]:
        """The held-out sets' windows, as ``val_dataloader`` (reported as ``test/*``)."""
        return self.val_dataloader()

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Counts consumed training samples (Lightning's prefetched batch is not counted), then
        defers to the LightningModule's own hook if it defines one."""
        trainer = self.trainer
        if trainer is not None and trainer.training:
            self._samples_consumed += int(batch[0].shape[0])
        model = trainer.lightning_module if trainer is not None else None
        if model is not None and is_overridden("on_before_batch_transfer", model):
            batch = model.on_before_batch_transfer(batch, dataloader_idx)
        return batch

    def state_dict(self) -> dict[str, Any]:
        """The training stream's position: samples consumed by this rank (all ranks agree)."""
        return {
            "samples_consumed": self._samples_consumed,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "tokenizer_sha256": self._tok.sha256,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the training stream where ``state_dict`` left it (same tokenizer only)."""
        trained = state_dict.get("tokenizer_sha256")
        if trained is not None and trained != self._tok.sha256:
            raise CheckpointError(
                f"the checkpoint was trained with another tokenizer than "
                f"tokenizer={self.tokenizer_spec!r} (sha256 {trained[:12]}... in the checkpoint, "
                f"{self._tok.sha256[:12]}... here): use the run's own tokenizer"
            )
        n = state_dict.get("samples_consumed")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(
                f"samples_consumed={n!r} in the data module state: expected an integer >= 0"
            )
        if state_dict.get("seed", self.seed) != self.seed:
            log.warning(
                "resuming with seed=%s, the checkpoint's stream used seed=%s",
                self.seed,
                state_dict.get("seed"),
            )
        self._samples_consumed = n
