"""Passkey retrieval: a key of digits hidden in Shakespeare at a depth, asked for at the end."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError
from lit_sparse.tasks.registry import register_task
from lit_sparse.tasks.synthetic import (
    IGNORE_INDEX,
    Examples,
    RecallDataModule,
    Seed,
    check_positive,
    seeded_rng,
)


@dataclass(frozen=True)
class PasskeyTemplate:
    """The passkey prompt's token ids: ``needle_prefix``, the key, ``needle_suffix`` (hidden in the
    filler), then ``question`` and the key again at the end."""

    needle_prefix: tuple[int, ...]
    needle_suffix: tuple[int, ...]
    question: tuple[int, ...]
    digits: tuple[int, ...]
    """The ids of the key's symbols (the ten digits, each its own token)."""

    @classmethod
    def from_tokenizer(cls, tokenizer) -> PasskeyTemplate:
        """The prompt (" The pass key is 7 2 9 1 4. Remember it." ...) in ``tokenizer``'s ids."""

        def ids(text: str) -> tuple[int, ...]:
            return tuple(tokenizer.encode(text).ids)

        digits = tuple(ids(f" {d}")[0] for d in range(10))
        if len(set(digits)) != 10 or any(len(ids(f" {d}")) != 1 for d in range(10)):
            raise ConfigError("passkey: the tokenizer must encode each ' <digit>' as one token")
        return cls(
            ids(" The pass key is"),
            ids(". Remember it."),
            ids(" What is the pass key? The pass key is"),
            digits,
        )

    def overhead(self, key_length: int) -> int:
        """Tokens of an example that are not filler."""
        return len(self.needle_prefix + self.needle_suffix + self.question) + 2 * key_length


def passkey(
    num_examples: int,
    seq_len: int,
    depths: float | Sequence[float] | np.ndarray,
    filler: np.ndarray | Tensor,
    template: PasskeyTemplate,
    key_length: int = 5,
    seed: Seed = 0,
) -> tuple[Tensor, Tensor]:
    """Passkey retrieval: (inputs, labels) with a key of ``key_length`` random digits hidden in
    ``filler`` (1-D token ids) at ``depths`` (0: before all the filler, 1: after it; one or one
    per example), asked for at the end; the labels are the key's digits there, -100 elsewhere."""
    check_positive(num_examples=num_examples, seq_len=seq_len, key_length=key_length)
    depth = np.broadcast_to(np.asarray(depths, dtype=np.float64), (num_examples,))
    if ((depth < 0) | (depth > 1) | ~np.isfinite(depth)).any():
        raise ConfigError(f"depths={depths!r}: expected depths in [0, 1]")
    filler = np.asarray(filler, dtype=np.int64).reshape(-1)
    room = seq_len - template.overhead(key_length)  # filler tokens per example
    if room < 1:
        raise ConfigError(
            f"seq_len={seq_len}: a passkey example needs more than "
            f"{template.overhead(key_length)} tokens (the prompt with a key of {key_length})"
        )
    if filler.size <= room:
        raise ConfigError(f"passkey: the filler has {filler.size} tokens, fewer than {room + 1}")
    rng = seeded_rng(seed)
    n = num_examples
    offsets = rng.integers(0, filler.size - room, size=n)
    text = filler[offsets[:, None] + np.arange(room)]  # (N, room)
    key = np.asarray(template.digits)[rng.integers(0, 10, size=(n, key_length))]  # (N, K)

    def rows(ids: tuple[int, ...]) -> np.ndarray:  # (N, len(ids)): ids in every row
        return np.broadcast_to(np.asarray(ids, dtype=np.int64), (n, len(ids)))

    needle = np.concatenate(  # (N, S)
        [rows(template.needle_prefix), key, rows(template.needle_suffix)], axis=1
    )
    tail = np.concatenate([rows(template.question), key], axis=1)
    # the needle goes in at filler position `at`: columns of text before it keep their
    # place, the rest move right by the needle's length
    at = np.rint(depth * room).astype(np.int64)  # (N,)
    body = np.empty((n, room + needle.shape[1]), dtype=np.int64)
    columns = np.arange(body.shape[1])[None, :]  # (1, room + S)
    in_needle = (columns >= at[:, None]) & (columns < at[:, None] + needle.shape[1])
    source = np.where(columns < at[:, None], columns, columns - needle.shape[1])
    body[:] = np.take_along_axis(text, np.clip(source, 0, room - 1), axis=1)
    body[in_needle] = needle.reshape(-1)
    inputs = np.concatenate([body, tail], axis=1)  # (N, L)
    labels = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    labels[:, seq_len - key_length - 1 : seq_len - 1] = key
    return torch.from_numpy(inputs), torch.from_numpy(labels)


@functools.cache
def corpus_tokens(part: str) -> np.ndarray:
    """The embedded Shakespeare's ``train`` or ``val`` tokens, through the token cache."""
    from lit_sparse.data.datamodule import default_cache_dir
    from lit_sparse.data.sources import SourceConfig
    from lit_sparse.data.token_cache import build_source, check_part, make_plan, open_tokens
    from lit_sparse.data.tokenizer import load_tokenizer

    tok = load_tokenizer("embedded")
    source = SourceConfig(name="shakespeare", path="embedded:shakespeare")
    plan = make_plan(source, tok, default_cache_dir(), None)
    found = check_part(plan, part, verify_checksum=False)
    files = {part: found} if not isinstance(found, str) else build_source(plan, tok)
    return np.asarray(open_tokens(files[part]), dtype=np.int64)


@functools.cache
def embedded_template() -> PasskeyTemplate:
    """The passkey prompt in the embedded tokenizer's ids."""
    from lit_sparse.data.tokenizer import load_tokenizer

    return PasskeyTemplate.from_tokenizer(load_tokenizer("embedded").tokenizer)


def _depth_name(depth: float) -> str:
    """``depth25``: the needle 25 % into the text (a module name: no dots)."""
    return f"depth{round(100 * depth)}"


@register_task("passkey")
class PasskeyDataModule(RecallDataModule):
    """Passkey retrieval: a key of digits at a depth of Shakespeare, asked for at the end.

    Args:
        seq_len: T, the training length.
        key_length: digits of the key (each its own token).
        batch_size: training examples per batch, each at a depth uniform in [0, 1].
        depths: the held-out depths (0: the needle first, 1: right before the question).
        val_examples: examples per depth at T.
        min_examples: examples per depth at longer lengths, at least.
        val_batch_size: held-out examples per validation batch.
        seed: seed of the training stream (the preset sets it to the run's seed).
        val_seed: seed of the held-out sets (the same for every run).
    """

    @classmethod
    def kit_options(cls) -> dict[str, Any]:
        return {"seq_len": 64, "val_examples": 4, "min_examples": 2, "depths": [0.0, 1.0]}

    summary = "a key of digits hidden at a depth of Shakespeare, asked for at the end"

    @classmethod
    def impossible_settings(cls) -> list[dict[str, Any]]:
        return [{"seq_len": 10}, {"depths": [1.5]}, {"key_length": 0}]

    def __init__(
        self,
        seq_len: int = 256,
        key_length: int = 5,
        batch_size: int = 32,
        depths: list[float] | None = None,
        val_examples: int = 32,
        min_examples: int = 8,
        val_batch_size: int = 32,
        seed: int = 0,
        val_seed: int = 1234,
    ):
        super().__init__(seq_len, batch_size, val_batch_size, seed, val_seed)
        self.key_length = check_int("data.key_length", key_length)
        self.min_examples = check_int("data.min_examples", min_examples)
        self.depths = [0.0, 0.25, 0.5, 0.75, 1.0] if depths is None else [float(d) for d in depths]
        if not self.depths or any(not 0 <= d <= 1 for d in self.depths):
            raise ConfigError(f"data.depths={depths!r}: expected depths in [0, 1]")
        if len({_depth_name(d) for d in self.depths}) != len(self.depths):
            raise ConfigError(f"data.depths={depths!r}: expected distinct depths (in percent)")
        self.val_examples = check_int("data.val_examples", val_examples)
        self.vocab_size = self.model_vocab_size()
        overhead = embedded_template().overhead(self.key_length)
        if seq_len <= overhead:
            raise ConfigError(
                f"data.seq_len={seq_len}: a passkey example with a key of {key_length} digits "
                f"needs more than {overhead} tokens"
            )

    @classmethod
    def model_vocab_size(cls, **init_args: Any) -> int:
        from lit_sparse.data.tokenizer import load_tokenizer, round_up

        return round_up(load_tokenizer("embedded").size)

    def train_batch(self, n: int, seed: tuple[int, ...]) -> Examples:
        depths = seeded_rng((*seed, 1)).random(n)
        return passkey(
            n, self.seq_len, depths, corpus_tokens("train"), embedded_template(),
            self.key_length, seed,
        )  # fmt: skip

    def check_length(self, length: int) -> None:
        overhead = embedded_template().overhead(self.key_length)
        if length <= overhead:
            raise ConfigError(
                f"length {length}: the passkey task evaluates lengths >= {overhead + 1} (an "
                f"example with a key of {self.key_length} digits needs more than {overhead} "
                "tokens)"
            )

    def set_names_at(self, length: int) -> list[str]:
        if length <= embedded_template().overhead(self.key_length):
            return []
        return [_depth_name(d) for d in self.depths]

    def make_set(self, length: int, name: str, seed: tuple[int, ...]) -> Examples:
        depth = self.depths[[_depth_name(d) for d in self.depths].index(name)]
        return passkey(
            self.examples_at(length), length, depth, corpus_tokens("val"), embedded_template(),
            self.key_length, seed,
        )  # fmt: skip
