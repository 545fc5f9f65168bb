"""Text in, text out: prompts continued until a stop string (left out), end-of-text or
``max_new_tokens``; equal-length prompts run as one unpadded batch (greedy: as if each alone)."""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence

from lit_sparse.errors import ConfigError
from lit_sparse.generation.generate import Generation
from lit_sparse.generation.sampling import Sampler
from lit_sparse.generation.scoring import check_length_options, length_limit
from lit_sparse.generation.text import TextStream


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the earliest occurrence of any stop string, and whether one occurs."""
    found = [i for i in (text.find(s) for s in stop) if i >= 0]
    return (text[: min(found)], True) if found else (text, False)


def _checked_prompts(prompts) -> list[str]:
    if isinstance(prompts, str):
        raise ConfigError("prompts: expected a list of strings, got one string (wrap it: [prompt])")
    if not isinstance(prompts, Iterable):
        raise ConfigError(f"prompts: expected a list of strings, got {type(prompts).__name__}")
    prompts = list(prompts)
    for n, p in enumerate(prompts):
        if not isinstance(p, str):
            raise ConfigError(f"prompts[{n}]: expected a string, got {type(p).__name__} {p!r:.60}")
    return prompts


def _checked_stop(stop) -> list[str]:
    if stop is not None and not isinstance(stop, (str, Iterable)):
        raise ConfigError(
            f"stop={stop!r}: expected a string or a list of strings, got {type(stop).__name__}"
        )
    stop = [stop] if isinstance(stop, str) else list(stop or ())
    for s in stop:
        if not isinstance(s, str) or not s:
            raise ConfigError(f"stop: expected non-empty strings, got {s!r}")
    return stop


def _fitted_prompt(
    ids: list[int], n: int, max_new_tokens: int, limit: int | None, truncation: str
) -> tuple[list[int], bool]:
    """The prompt's ids fitted to ``limit`` with the new tokens (left-clipped), and if clipped."""
    if limit is None or len(ids) + max_new_tokens <= limit:
        return ids, False
    room = limit - max_new_tokens
    if room < 1:
        raise ConfigError(
            f"max_new_tokens={max_new_tokens}: leaves no room for a prompt within "
            f"max_length={limit}; use at most {limit - 1} new tokens or raise max_length"
        )
    if truncation == "error":
        raise ConfigError(
            f"prompts[{n}]: {len(ids)} tokens + max_new_tokens={max_new_tokens} exceed "
            f"max_length={limit}; shorten the prompt, lower max_new_tokens, raise max_length, "
            "or pass truncation='left' to drop the prompt's oldest tokens"
        )
    return ids[-room:], True


def generate_text(
    model,
    tokenizer,
    prompts: Sequence[str],
    max_new_tokens: int,
    *,
    stop: Sequence[str] | str = (),
    stop_at_eos: bool = True,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    batch_size: int = 16,
    max_length: int | None = None,
    truncation: str = "error",
) -> list[str]:
    """Continue each prompt and return the new text, without the stop string that ended it.

    Args:
        prompts: texts (an empty one starts a new document, as ``tokenizer.eos_token`` does).
        stop: strings that end a continuation.
        stop_at_eos: also end at the end-of-text token.
        temperature, top_k, top_p, seed: as :class:`Sampler`, greedy by default (samples
            depend on batching).
        batch_size: prompts of equal token length generated together.
        max_length: the most tokens of a prompt plus continuation (default: the model's limit).
        truncation: ``"error"`` refuses a prompt that does not fit; ``"left"`` drops its oldest.
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise ConfigError(f"max_new_tokens={max_new_tokens!r}: must be an integer >= 1")
    if max_new_tokens < 1:
        raise ConfigError(f"max_new_tokens={max_new_tokens}: must be >= 1")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size={batch_size!r}: must be an integer >= 1")
    prompts, stop = _checked_prompts(prompts), _checked_stop(stop)
    Sampler(temperature, top_k, top_p, seed)  # one line for a bad sampling option
    check_length_options(max_length, truncation)
    limit = length_limit(model, max_length)
    encoded, clipped = [], 0
    for n, ids in enumerate(tokenizer.encode_batch(prompts)):
        ids, cut = _fitted_prompt(ids or [tokenizer.eos_id], n, max_new_tokens, limit, truncation)
        encoded.append(ids)
        clipped += cut
    if clipped:
        warnings.warn(
            f"generate_text: {clipped} of {len(prompts)} prompts clipped from the left to fit "
            f"max_length={limit} with max_new_tokens={max_new_tokens}",
            stacklevel=2,
        )
    by_length: dict[int, list[int]] = defaultdict(list)
    for n, ids in enumerate(encoded):
        by_length[len(ids)].append(n)
    texts: list[str] = [""] * len(prompts)
    eos_id = tokenizer.eos_id if stop_at_eos else None
    vocab_limit = min(len(tokenizer), model.config.vocab_size)
    options = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, eos_id=eos_id)
    for rows in by_length.values():
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            ids = [encoded[n] for n in batch]
            generation = Generation(model, ids, max_new_tokens, vocab_limit=vocab_limit, **options)
            for n, text in zip(batch, _continue(generation, tokenizer, stop, eos_id), strict=True):
                texts[n] = text
    return texts


def _continue(generation: Generation, tokenizer, stop: list[str], eos_id: int | None):
    """Each row's text up to its first stop string or end-of-text; ends the generation once every
    row has. Stop strings are searched only where new text could complete one."""
    rows = generation.prompt.shape[0]
    streams = [TextStream(tokenizer, row) for row in generation.prompt.tolist()]
    ended, tails = [False] * rows, [""] * rows  # tails: the last reach characters
    reach = max((len(s) for s in stop), default=1) - 1
    for tokens in generation:
        for r, token in enumerate(tokens.tolist()):
            if ended[r]:
                continue
            if token == eos_id:
                ended[r] = True
                continue
            new = streams[r].push(token)
            if new and stop:
                text = tails[r] + new
                ended[r] = cut_at_stop(text, stop)[1]
                tails[r] = text[len(text) - reach :] if reach else ""
        if all(ended):
            break
    # the whole text once per row: a character still held back, and the text before the stop
    return [cut_at_stop(stream.text(), stop)[0] for stream in streams]
