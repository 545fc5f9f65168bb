"""Recall at a distance: seeded, vectorised generators of three synthetic retrieval tasks.

Every generator returns ``(inputs, labels)``, int64 tensors of shape (N, L). ``labels[t]`` is
the target of the prediction made at position t (the token that should follow ``inputs[t]``),
``IGNORE_INDEX`` (-100) where nothing is asked, so a language model's next-token loss applies
as is. The same seed gives the same tensors; ``seed`` may also be a sequence of integers
(e.g. seed, rank, batch), mixed by numpy's ``SeedSequence``.

- :func:`multiquery_ar`: multi-query associative recall (MQAR), exactly as Zoology
  (Arora et al., 2023) defines it: the key-value pairs first, then the keys again as
  queries at power-law gaps, random tokens elsewhere; the label of a query is its value.
  Its ``gap`` (far MQAR) puts G filler tokens between the pairs and the queries.
- :func:`distance_retrieval`: one key-value pair and its query exactly d tokens after the
  key, in random filler: accuracy per d measures how far a pattern reaches through depth.
- :func:`distance_pairs`: several such pairs in one example, each asked for once at its own
  distance (training with more than one answer per example).
- :func:`passkey`: a key of digits hidden at a chosen depth of real filler text, asked for
  at the end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from lit_sparse.data.checks import check_int
from lit_sparse.errors import ConfigError

__all__ = [
    "IGNORE_INDEX",
    "PasskeyTemplate",
    "check_pairs",
    "distance_buckets",
    "distance_pairs",
    "distance_retrieval",
    "gap_probabilities",
    "multiquery_ar",
    "passkey",
]

IGNORE_INDEX = -100
"""The label of positions where nothing is asked (``F.cross_entropy``'s ignore_index)."""

Seed = int | Sequence[int]


def _rng(seed: Seed) -> np.random.Generator:
    keys = [seed] if isinstance(seed, (int, float, np.integer, np.floating)) else seed
    sequence = isinstance(keys, (Sequence, np.ndarray)) and not isinstance(keys, (str, bytes))
    if not sequence or not all(_whole(k) for k in keys):
        raise ConfigError(f"seed={seed!r}: expected an integer >= 0, or a sequence of them")
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in keys]))


def _whole(value) -> bool:
    """Whether ``value`` is a whole number >= 0 (an int, or a float such as 3.0)."""
    if isinstance(value, (int, np.integer)):
        return not isinstance(value, bool) and value >= 0
    if isinstance(value, (float, np.floating)):
        return math.isfinite(value) and value >= 0 and int(value) == value
    return False


def _positive(**values: int) -> None:
    for name, value in values.items():
        check_int(name, value)


def _sample_without_replacement(
    rng: np.random.Generator, rows: int, k: int, weights: np.ndarray
) -> np.ndarray:
    """(rows, k) indices into ``weights``, each row k distinct indices drawn one after another
    with probability proportional to the weights of those not drawn yet (numpy's
    ``choice(replace=False, p=...)``), all rows at once: the k largest of log(u) / w
    (Efraimidis and Spirakis), in the order they would have been drawn."""
    scores = np.log(rng.random((rows, weights.shape[-1]))) / weights  # (rows, n), all < 0
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]  # (rows, k) the k largest, unordered
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


def gap_probabilities(space: int, power_a: float = 0.01) -> np.ndarray:
    """p(i) ∝ a·i^(a-1) for i = 1..space, normalised: the chance that a query lands at gap
    index i - 1 (Zoology's power law; a = 0.01 puts most queries near the pairs)."""
    number = isinstance(power_a, (int, float, np.integer, np.floating))
    if isinstance(power_a, bool) or not number or not 0 < power_a < np.inf:
        raise ConfigError(f"power_a={power_a!r}: expected a finite number > 0 (Zoology: 0.01)")
    with np.errstate(all="ignore"):
        p = power_a * np.arange(1, space + 1, dtype=np.float64) ** (power_a - 1)
        p = p / p.sum()
    if not (np.isfinite(p).all() and (p > 0).all()):
        raise ConfigError(
            f"power_a={power_a!r}: too large for {space} query gaps (the weights a·i^(a-1) "
            "overflow or underflow float64); use a smaller power_a (Zoology: 0.01; above 1 "
            "the queries go to the far end)"
        )
    return p


def multiquery_ar(
    num_examples: int,
    seq_len: int,
    num_kv_pairs: int,
    vocab_size: int,
    power_a: float = 0.01,
    seed: Seed = 0,
    gap: int = 0,
) -> tuple[Tensor, Tensor]:
    """MQAR examples as Zoology defines them: (inputs, labels), each (N, L) int64.

    - keys: ``num_kv_pairs`` distinct tokens from [1, V/2); values: distinct tokens from
      [V/2, V); the first 2·kv positions are ``k0 v0 k1 v1 ...``;
    - ``gap`` G positions of random tokens follow them (far MQAR; 0 is Zoology's task);
    - the remaining region of L - 2·kv - G positions holds the queries: key i again at
      offset 2·g_i of the region, the gaps g_i distinct, drawn from p(i) ∝ a·i^(a-1)
      (:func:`gap_probabilities`, a = ``power_a``), so every query sits more than G tokens
      after its value;
    - every other position of the region is a random token from [0, V);
    - the label at a query's position is its value (the token after the query should be
      it); -100 everywhere else.

    Constraints: L even, 4·kv + G <= L (Zoology's 4·kv <= L at G = 0), V > L.
    """
    _positive(num_examples=num_examples, seq_len=seq_len, num_kv_pairs=num_kv_pairs)
    _positive(vocab_size=vocab_size)
    check_int("gap", gap, low=0)
    if seq_len % 2:
        raise ConfigError(f"seq_len={seq_len}: MQAR needs an even sequence length")
    if 4 * num_kv_pairs + gap > seq_len:
        if gap:
            raise ConfigError(
                f"gap={gap}: no room for the queries at seq_len={seq_len} and "
                f"num_kv_pairs={num_kv_pairs}; far MQAR needs 4 * num_kv_pairs + gap <= "
                f"seq_len, so gap <= {max(seq_len - 4 * num_kv_pairs, 0)}"
            )
        raise ConfigError(
            f"num_kv_pairs={num_kv_pairs}: MQAR needs 4 * num_kv_pairs <= seq_len ({seq_len})"
        )
    if vocab_size <= seq_len:
        raise ConfigError(f"vocab_size={vocab_size}: MQAR needs vocab_size > seq_len ({seq_len})")
    rng = _rng(seed)
    n, kv, half = num_examples, num_kv_pairs, vocab_size // 2
    keys = 1 + _sample_without_replacement(rng, n, kv, np.ones(half - 1))  # (N, kv) in [1, V/2)
    values = half + _sample_without_replacement(rng, n, kv, np.ones(vocab_size - half))
    context = 2 * kv
    space = (seq_len - context - gap) // 2
    gaps = _sample_without_replacement(rng, n, kv, gap_probabilities(space, power_a))  # (N, kv)

    inputs = rng.integers(0, vocab_size, size=(n, seq_len))  # random tokens everywhere first
    inputs[:, 0:context:2], inputs[:, 1:context:2] = keys, values
    rows = np.arange(n)[:, None]
    where = context + gap + 2 * gaps  # (N, kv) query positions, at most seq_len - 2
    inputs[rows, where] = keys
    labels = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    labels[rows, where] = values
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(labels)


def distance_retrieval(
    num_examples: int,
    seq_len: int,
    distances: int | Sequence[int] | np.ndarray,
    vocab_size: int,
    seed: Seed = 0,
    values_in_filler: bool = True,
) -> tuple[Tensor, Tensor]:
    """One key-value pair and its query exactly d tokens after the key: (inputs, labels).

    Per example: a key from [1, V/2) at a random position p, its value from [V/2, V) at p + 1,
    the key again (the query) at p + d, random filler from [0, V) without the key everywhere
    else (so the query has one answer); the label at the query is the value. ``distances`` is
    one d for every example or one per example, each in [2, L - 2] (the token after the
    query is in the sequence, as in MQAR). ``values_in_filler=False`` draws the filler from
    the key range [0, V/2) only, so the values stand out from it (as MQAR's do at its start).
    """
    _positive(num_examples=num_examples, seq_len=seq_len, vocab_size=vocab_size)
    d = _distances(distances, num_examples)
    bad = d[(d < 2) | (d > seq_len - 2)]
    if bad.size:
        raise ConfigError(
            f"distance={int(bad[0])}: expected a distance in [2, seq_len - 2] = [2, {seq_len - 2}]"
        )
    if vocab_size < 4:
        raise ConfigError(f"vocab_size={vocab_size}: expected at least 4 tokens")
    rng = _rng(seed)
    n, half = num_examples, vocab_size // 2
    keys = rng.integers(1, half, size=n)
    values = rng.integers(half, vocab_size, size=n)
    start = (rng.random(n) * (seq_len - 1 - d)).astype(np.int64)  # p in [0, L - 2 - d]
    top = vocab_size if values_in_filler else half
    filler = rng.integers(0, top - 1, size=(n, seq_len))
    inputs = filler + (filler >= keys[:, None])  # uniform over [0, top) without the key
    rows = np.arange(n)
    inputs[rows, start], inputs[rows, start + 1], inputs[rows, start + d] = keys, values, keys
    labels = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    labels[rows, start + d] = values
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(labels)


def check_pairs(pairs: int, seq_len: int, vocab_size: int, field: str = "pairs") -> None:
    """One ConfigError line naming ``field`` unless ``pairs`` pairs fit an example of
    ``seq_len`` tokens (4 * pairs <= L) with distinct keys (pairs <= V/2 - 1)."""
    _positive(**{field: pairs})
    if 4 * pairs > seq_len:
        raise ConfigError(f"{field}={pairs}: needs 4 * pairs <= seq_len ({seq_len})")
    if pairs > vocab_size // 2 - 1:
        raise ConfigError(
            f"{field}={pairs}: needs distinct keys, at most V/2 - 1 = {vocab_size // 2 - 1}"
        )


def distance_pairs(
    num_examples: int,
    seq_len: int,
    pairs: int,
    vocab_size: int,
    seed: Seed = 0,
    values_in_filler: bool = True,
) -> tuple[Tensor, Tensor]:
    """``pairs`` key-value pairs per example, each asked for once: (inputs, labels).

    As :func:`distance_retrieval`, with several pairs: distinct keys from [1, V/2), values
    from [V/2, V), and each pair's query the key again d tokens after it, d uniform in
    [2, L - 2] and drawn again where the pair does not fit between those placed before it;
    filler from [0, V) (or [0, V/2) without ``values_in_filler``) without the example's keys,
    so every query has one answer. An example
    holds ``pairs`` labels, where :func:`distance_retrieval`'s holds one: a training batch
    asks ``pairs`` times as many questions for the same tokens.
    """
    _positive(num_examples=num_examples, seq_len=seq_len, vocab_size=vocab_size)
    check_pairs(pairs, seq_len, vocab_size)
    half = vocab_size // 2
    rng = _rng(seed)
    n = num_examples
    keys = _sample_without_replacement(rng, n, pairs, np.ones(half - 1)) + 1  # (n, pairs)
    values = rng.integers(half, vocab_size, size=(n, pairs))
    top = vocab_size if values_in_filler else half
    inputs = rng.integers(0, top, size=(n, seq_len))
    while (clash := (inputs[:, :, None] == keys[:, None, :]).any(-1)).any():
        inputs[clash] = rng.integers(0, top, size=int(clash.sum()))
    labels = np.full((n, seq_len), IGNORE_INDEX, dtype=np.int64)
    for row in range(n):
        free = np.ones(seq_len, dtype=bool)
        for key, value in zip(keys[row], values[row], strict=True):
            for _ in range(1000):
                d = int(rng.integers(2, seq_len - 1))
                span = seq_len - 1 - d  # starts p in [0, L - 2 - d]: p, p + 1, p + d free
                starts = np.flatnonzero(free[:span] & free[1 : span + 1] & free[d : d + span])
                if starts.size:
                    break
            else:  # unreachable at 4 * pairs <= L: far more room than three slots a pair
                raise ConfigError(f"pairs={pairs}: no room for a pair at seq_len={seq_len}")
            p = int(starts[rng.integers(starts.size)])
            free[[p, p + 1, p + d]] = False
            inputs[row, [p, p + 1, p + d]] = key, value, key
            labels[row, p + d] = value
    return torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(labels)


def _distances(distances, num_examples: int) -> np.ndarray:
    """``distances`` as (num_examples,) int64: one whole number, or one per example."""
    values = np.asarray(distances, dtype=object if isinstance(distances, str) else None)
    if values.ndim > 1 or (values.ndim == 1 and values.shape[0] != num_examples):
        count = f"{values.shape[0]} values" if values.ndim == 1 else f"shape {values.shape}"
        raise ConfigError(
            f"distances: {count} for num_examples={num_examples}; give one distance, or one "
            "per example"
        )
    flat = values.reshape(-1)
    bad = next((v for v in flat.tolist() if not _whole(v)), None)
    if bad is not None or values.dtype == bool:
        shown = bad if bad is not None else distances
        raise ConfigError(f"distances={shown!r}: expected whole numbers of tokens (>= 2)")
    return np.broadcast_to(values.astype(np.int64), (num_examples,))


def distance_buckets(low: int, high: int) -> list[tuple[int, int]]:
    """Inclusive distance ranges covering [low, high]: powers of two, [2, 3], [4, 7], [8, 15],
    ... (the first and the last cut to ``low`` and ``high``)."""
    if not 1 <= low <= high:
        raise ConfigError(f"distances [{low}, {high}]: expected 1 <= low <= high")
    buckets, edge = [], 1 << max(0, low.bit_length() - 1)
    while edge <= high:
        lo, hi = max(edge, low), min(2 * edge - 1, high)
        if lo <= hi:
            buckets.append((lo, hi))
        edge *= 2
    return buckets


# ------------------------------------------------------------------------------ passkey
@dataclass(frozen=True)
class PasskeyTemplate:
    """The token ids of the passkey prompt around the filler text: ``needle_prefix``, the
    key, ``needle_suffix`` (the needle, hidden at a depth of the filler), then at the end
    ``question`` and the key again, which is what is asked."""

    needle_prefix: tuple[int, ...]
    needle_suffix: tuple[int, ...]
    question: tuple[int, ...]
    digits: tuple[int, ...]
    """The ids of the key's symbols (the ten digits, each its own token)."""

    @classmethod
    def from_tokenizer(cls, tokenizer) -> PasskeyTemplate:
        """The prompt in English, encoded by a ``tokenizers.Tokenizer``: " The pass key is
        7 2 9 1 4. Remember it." ... " What is the pass key? The pass key is 7 2 9 1 4"."""

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
        return (
            len(self.needle_prefix) + len(self.needle_suffix) + len(self.question) + 2 * key_length
        )


def passkey(
    num_examples: int,
    seq_len: int,
    depths: float | Sequence[float] | np.ndarray,
    filler: np.ndarray | Tensor,
    template: PasskeyTemplate,
    key_length: int = 5,
    seed: Seed = 0,
) -> tuple[Tensor, Tensor]:
    """Passkey retrieval: a key of ``key_length`` random digits hidden in filler text.

    Per example: a random window of ``filler`` (a 1-D array of token ids, e.g. a tokenised
    corpus) with the needle (``template.needle_prefix``, the key, ``needle_suffix``)
    inserted at ``depth`` of it (0: before all the filler, 1: after it), then the
    question and the key again, ending the sequence. The labels ask for the key's digits at
    the end (at the positions before each of them); -100 elsewhere. ``depths``: one for
    every example or one per example, each in [0, 1].
    """
    _positive(num_examples=num_examples, seq_len=seq_len, key_length=key_length)
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
    rng = _rng(seed)
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
