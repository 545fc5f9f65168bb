"""Each (context, continuation) pair's log-likelihood and whether greedy decoding produces it, in
right-padded batches sorted by length (exact: pads after a row change none of its logits)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from lit_sparse.errors import ConfigError

TRUNCATION = ("error", "left")
"""An input over ``max_length``: one ConfigError, or its oldest tokens dropped with a warning."""

PAD_ID = 0  # right padding: any id serves, no real position reads it
HEAD_ROWS = 1024
"""Positions per output-layer call, so the (positions, vocab) logits stay tens of MB."""


class Score(NamedTuple):
    """One pair's result (a tuple, as lm-eval's ``loglikelihood`` returns)."""

    logprob: float
    """Sum of the continuation tokens' log-probabilities given the context (natural log)."""
    greedy: bool
    """Whether each continuation token is the most likely one at its position."""


def check_length_options(max_length: int | None, truncation: str) -> None:
    """One ConfigError line for a ``max_length`` or ``truncation`` that is not allowed."""
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
    ):
        raise ConfigError(f"max_length={max_length!r}: must be an integer >= 1, or None")
    if truncation not in TRUNCATION:
        raise ConfigError(f"truncation={truncation!r}: allowed: {', '.join(TRUNCATION)}")


def length_limit(model, max_length: int | None) -> int | None:
    """The most input tokens: ``max_length`` (at most the model's limit), else that limit."""
    supported = model.max_length
    if max_length is not None and supported is not None and max_length > supported:
        raise ConfigError(
            f"max_length={max_length}: above the {supported} tokens this model's attention "
            f"supports; use at most {supported}"
        )
    return max_length if max_length is not None else supported


def _checked_ids(ids, what: str, vocab_size: int) -> list[int]:
    if isinstance(ids, Tensor):
        ids = ids.tolist()
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise ConfigError(f"{what}: expected a list of token ids, got {type(ids).__name__}")
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, int):
            raise ConfigError(f"{what}: expected integer token ids, got {i!r}")
        if not 0 <= i < vocab_size:
            raise ConfigError(f"{what}: token id {i} outside the vocabulary [0, {vocab_size})")
    return list(ids)


def _fitted(
    pairs, vocab_size: int, limit: int | None, truncation: str
) -> list[tuple[list[int], int]]:
    """Per pair: its tokens (clipped from the left where allowed) and the continuation's length."""
    rows, clipped = [], 0
    for n, pair in enumerate(pairs):
        try:
            context, continuation = pair
        except (TypeError, ValueError):
            raise ConfigError(
                f"pairs[{n}]: expected a (context ids, continuation ids) pair"
            ) from None
        context = _checked_ids(context, f"pairs[{n}] context", vocab_size)
        continuation = _checked_ids(continuation, f"pairs[{n}] continuation", vocab_size)
        if not context:
            raise ConfigError(
                f"pairs[{n}]: an empty context; the first continuation token needs one to be "
                "predicted from (a document starts after tokenizer.document_prefix, the "
                "end-of-text id)"
            )
        if not continuation:
            raise ConfigError(f"pairs[{n}]: an empty continuation; nothing to score")
        tokens = context + continuation
        if limit is not None and len(tokens) - 1 > limit:
            if len(continuation) > limit:
                raise ConfigError(
                    f"pairs[{n}]: a continuation of {len(continuation)} tokens is longer than "
                    f"max_length={limit}; score it in pieces or raise max_length"
                )
            if truncation == "error":
                raise ConfigError(
                    f"pairs[{n}]: context + continuation need {len(tokens) - 1} input tokens, "
                    f"above max_length={limit}; raise max_length, shorten the context, or pass "
                    "truncation='left' to drop its oldest tokens"
                )
            tokens, clipped = tokens[-(limit + 1) :], clipped + 1
        rows.append((tokens, len(continuation)))
    if clipped:
        warnings.warn(
            f"score: {clipped} of {len(rows)} contexts clipped from the left to "
            f"max_length={limit} tokens",
            stacklevel=3,
        )
    return rows


def score(
    model,
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    batch_size: int = 16,
    max_length: int | None = None,
    truncation: str = "error",
    progress: bool = False,
) -> list[Score]:
    """The log-likelihood of each continuation given its context, and whether it is greedy.

    Args:
        model: a ``LanguageModel`` (on its device and dtype, in inference mode).
        pairs: (context ids, continuation ids); a context holds at least one token (score a
            whole document after ``tokenizer.document_prefix``).
        batch_size: pairs per forward (a row's scores do not depend on the batch).
        max_length: the most input tokens (context + continuation - 1) per pair (default: the
            longest the model supports).
        truncation: ``"error"`` refuses a longer pair; ``"left"`` drops its oldest context tokens.

    Returns one :class:`Score` per pair, in the order given.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size={batch_size!r}: must be an integer >= 1")
    check_length_options(max_length, truncation)
    limit = length_limit(model, max_length)
    rows = _fitted(list(pairs), model.config.vocab_size, limit, truncation)
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]))  # longest first
    results: dict[int, Score] = {}
    device = next(model.parameters()).device
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc="scoring", unit="batch")
    with torch.inference_mode():
        for batch in batches:
            scores = _score_batch(model, [rows[i] for i in batch], device)
            results.update(zip(batch, scores, strict=True))
    return [results[i] for i in range(len(rows))]


def _score_batch(model, rows: list[tuple[list[int], int]], device: torch.device) -> list[Score]:
    """One right-padded forward over ``rows``; the head at continuations, HEAD_ROWS at a time."""
    width = max(len(tokens) - 1 for tokens, _ in rows)
    inputs = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    row_of, position, targets = [], [], []
    for r, (tokens, n) in enumerate(rows):
        end = len(tokens) - 1  # the last real input position + 1
        inputs[r, :end] = torch.tensor(tokens[:-1])
        row_of += [r] * n
        position += range(end - n, end)
        targets += tokens[-n:]
    features = model.features(inputs.to(device))  # (B, width, d_model)
    where = features.device
    scored = features[torch.tensor(row_of, device=where), torch.tensor(position, device=where)]
    targets = torch.tensor(targets, device=where)  # scored: (P, d_model), targets: (P,)
    logprobs = torch.empty(len(targets), dtype=torch.float64)
    greedy = torch.empty(len(targets), dtype=torch.bool)
    for start in range(0, len(targets), HEAD_ROWS):
        part = slice(start, start + HEAD_ROWS)
        logits = model.head(scored[part]).float().log_softmax(dim=-1)  # (<= HEAD_ROWS, V)
        logprobs[part] = logits.gather(-1, targets[part, None]).squeeze(-1).double().cpu()
        greedy[part] = (logits.argmax(dim=-1) == targets[part]).cpu()
    sizes = [n for _, n in rows]
    parts = zip(logprobs.split(sizes), greedy.split(sizes), strict=True)
    return [Score(float(lp.sum()), bool(g.all())) for lp, g in parts]
