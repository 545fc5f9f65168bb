"""Generation: the prompt in chunks through the training path (prefill), then one token at a time
through each layer's decoder, yielding tokens as they are made.

    for tokens in lit_sparse.generate(model, prompt_ids, 50, temperature=0.8, seed=0):
        ...  # tokens: (B,) the next id of every prompt"""

from __future__ import annotations

import numbers
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lit_sparse.errors import ConfigError
from lit_sparse.generation.prefill import DEFAULT_CHUNK, check_chunk, prefill
from lit_sparse.generation.sampling import Sampler
from lit_sparse.generation.weights import decoding_layout


@dataclass
class GenerationStats:
    """What one generation cost (filled in as it runs)."""

    prompt_tokens: int = 0
    """Tokens per prompt."""
    batch: int = 0
    new_tokens: int = 0
    """Tokens generated per prompt so far."""
    prefill_s: float = 0.0
    """Seconds in the prompt's forward (its first token's sampling included)."""
    decode_s: float = 0.0
    """Seconds in the later tokens' forwards and sampling (not the caller's time between)."""
    cache_bytes: int = 0
    """Bytes of the caches as allocated (they grow with the sequence)."""
    cache: str = ""
    """The caches in words (``LanguageModel.new_cache``)."""

    @property
    def decode_tokens_per_s(self) -> float:
        """New tokens per second after the first (each is one decoding step per prompt)."""
        steps = max(0, self.new_tokens - 1) * self.batch
        return steps / self.decode_s if self.decode_s > 0 else float("nan")

    @property
    def prefill_tokens_per_s(self) -> float:
        tokens = self.prompt_tokens * self.batch
        return tokens / self.prefill_s if self.prefill_s > 0 else float("nan")

    def to_text(self) -> str:
        return (
            f"prompt: {self.batch} x {self.prompt_tokens} tokens in {self.prefill_s:.3f} s "
            f"({self.prefill_tokens_per_s:.1f} tokens/s); generated: {self.batch} x "
            f"{self.new_tokens} tokens, {self.decode_tokens_per_s:.1f} tokens/s after the "
            f"first; KV cache: {self.cache_bytes / 2**20:.2f} MB ({self.cache})"
        )


def _check_integers(rows, where: str) -> None:
    """One ConfigError line naming the first non-integer id in nested lists (1.5 would truncate)."""
    for i, item in enumerate(rows):
        at = f"{where}[{i}]"
        integral = isinstance(item, numbers.Integral) and not isinstance(item, bool)
        if isinstance(item, Tensor):
            if item.dtype.is_floating_point or item.dtype == torch.bool or item.is_complex():
                raise ConfigError(f"{at}: expected integer token ids, got dtype {item.dtype}")
        elif isinstance(item, numbers.Complex) and not integral:  # bool is Complex
            raise ConfigError(
                f"{at}={item!r}: expected an integer token id, got {type(item).__name__} (ids "
                "are never rounded)"
            )
        elif isinstance(item, (list, tuple)):
            _check_integers(item, at)


def _prompt_tensor(prompt_ids, vocab_size: int, device: torch.device) -> Tensor:
    """(B, T) int64 on ``device`` from a tensor, a list of ids or a list of equal lists."""
    if isinstance(prompt_ids, Tensor):
        ids = prompt_ids
    else:
        rows = list(prompt_ids)
        if rows and all(isinstance(r, (Sequence, Tensor)) for r in rows):
            lengths = sorted({len(r) for r in rows})
            if len(lengths) > 1:
                raise ConfigError(
                    f"prompt_ids: prompts of unequal lengths {lengths}; a batch needs prompts "
                    "of equal length (generate them separately)"
                )
        _check_integers(rows, "prompt_ids")  # torch.tensor(dtype=long) truncates 1.5 to 1
        try:
            ids = torch.tensor(rows, dtype=torch.long)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ConfigError(f"prompt_ids: expected token ids, got {err}") from None
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.is_complex():
        raise ConfigError(f"prompt_ids: expected integer token ids, got dtype {ids.dtype}")
    if ids.dim() == 1:
        ids = ids[None]
    if ids.dim() != 2 or ids.shape[0] < 1:
        raise ConfigError(f"prompt_ids: expected (batch, length) ids, got shape {tuple(ids.shape)}")
    if ids.shape[1] < 1:
        raise ConfigError(
            "prompt_ids: an empty prompt; give at least one token (e.g. the tokenizer's "
            "end-of-text id to start a document)"
        )
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ConfigError(f"prompt_ids: token id {bad} outside the vocabulary [0, {vocab_size})")
    return ids.to(device=device, dtype=torch.long)


class Generation:
    """Iterating yields the next token of every prompt, (B,) int64, for up to ``max_new_tokens``
    steps; with ``eos_id`` a finished prompt yields ``eos_id`` and iteration stops when all have.
    Arguments are checked when made; float32 CPU matrices get :func:`decoding_layout`."""

    def __init__(
        self,
        model,
        prompt_ids,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        eos_id: int | None = None,
        prefill_chunk: int | None = DEFAULT_CHUNK,
        vocab_limit: int | None = None,
    ):
        vocab = model.config.vocab_size
        check_chunk(prefill_chunk)
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
            raise ConfigError(f"max_new_tokens={max_new_tokens!r}: must be an integer >= 1")
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens={max_new_tokens}: must be >= 1")
        self.sampler = Sampler(temperature, top_k, top_p, seed)
        if eos_id is not None and not (isinstance(eos_id, int) and 0 <= eos_id < vocab):
            raise ConfigError(f"eos_id={eos_id!r}: must be a token id in [0, {vocab})")
        integer = isinstance(vocab_limit, int) and not isinstance(vocab_limit, bool)
        if vocab_limit is not None and not (integer and 1 <= vocab_limit <= vocab):
            raise ConfigError(
                f"vocab_limit={vocab_limit!r}: must be an integer in [1, {vocab}] (the model's "
                "vocabulary), or None"
            )
        self.vocab_limit = vocab_limit  # ids at or past it are never chosen (None: all)
        device = next(model.parameters()).device
        self.prompt = _prompt_tensor(prompt_ids, vocab, device)
        batch, length = self.prompt.shape
        limit = model.max_length
        if limit is not None and length > limit:
            raise ConfigError(
                f"prompt_ids: a prompt of {length} tokens is longer than the model can take "
                f"({limit} tokens)"
            )
        if limit is not None and length + max_new_tokens > limit:
            raise ConfigError(
                f"max_new_tokens={max_new_tokens}: the prompt ({length} tokens) plus max_new_tokens"
                f" exceeds the {limit} tokens the model can take; use at most {limit - length}"
            )
        self.model, self.max_new_tokens = decoding_layout(model), max_new_tokens
        self.eos_id, self.prefill_chunk = eos_id, prefill_chunk
        self.cache = None
        self.stats = GenerationStats(prompt_tokens=length, batch=batch)

    def __iter__(self) -> Iterator[Tensor]:
        model, prompt = self.model, self.prompt
        batch, length = prompt.shape
        self.stats = stats = GenerationStats(prompt_tokens=length, batch=batch)
        generator = self.sampler.generator(prompt.device)
        start = time.perf_counter()
        with torch.inference_mode():
            # the last token is never fed back: the cache needs one position less
            self.cache = model.new_cache(batch, length + self.max_new_tokens - 1)
            logits = prefill(model, prompt, self.cache, self.prefill_chunk)  # (B, V)
            tokens = self.sampler(logits[:, : self.vocab_limit], generator)
        stats.prefill_s = time.perf_counter() - start
        done = torch.zeros(batch, dtype=torch.bool, device=prompt.device)
        for step in range(self.max_new_tokens):
            if step:
                start = time.perf_counter()
                with torch.inference_mode():
                    logits = model(tokens[:, None], self.cache)[:, -1]
                    tokens = self.sampler(logits[:, : self.vocab_limit], generator)
                stats.decode_s += time.perf_counter() - start
            if self.eos_id is not None:
                tokens = tokens.masked_fill(done, self.eos_id)
                done |= tokens == self.eos_id
            stats.new_tokens += 1
            stats.cache_bytes, stats.cache = self.cache.nbytes, self.cache.describe()
            yield tokens
            if self.eos_id is not None and bool(done.all()):
                return

    def run(self) -> Tensor:
        """Every new token at once: (B, n), n <= max_new_tokens."""
        return torch.stack(list(self), dim=1)


def generate(model, prompt_ids, max_new_tokens: int, **options: Any) -> Generation:
    """Continue ``prompt_ids``: a :class:`Generation` yielding every prompt's next token (B,).

    Args:
        prompt_ids: (B, T) token ids (a tensor, a list of ids, or equal-length lists).
        temperature, top_k, top_p, seed: how tokens are chosen (:class:`Sampler`; default T=1).
        eos_id: a prompt stops at this token; the iteration ends when every prompt has.
        prefill_chunk: prompt tokens per prefill chunk (default 2048; None: all at once).
        vocab_limit: only ids below it are produced (the tokenizer's size, for a padded vocab).
    """
    return Generation(model, prompt_ids, max_new_tokens, **options)
