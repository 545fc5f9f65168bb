"""transformers' cache of lit_sparse's decoders (lit_sparse/interop/hf/cache.py), on a
one-layer model: a prompt and its steps give the full forward's logits (through a rebuild when
a growing cache is outgrown), left-padded rows as if alone, rows picked and repeated as beam
search does, and each call it cannot serve one line. Through transformers' generate:
tests/interop/test_transformers.py."""

from __future__ import annotations

import re

import pytest
import torch

pytest.importorskip("transformers")

from lit_sparse import LanguageModel, build_attention  # noqa: E402
from lit_sparse.errors import ConfigError  # noqa: E402
from lit_sparse.interop.hf.cache import RIGHT_PADDED, LitSparseCache  # noqa: E402
from tests.shapes import tiny_config  # noqa: E402

TINY = tiny_config(context_length=8)
"""336 parameters."""


@pytest.fixture(scope="module")
def network() -> LanguageModel:
    torch.manual_seed(0)
    return LanguageModel(TINY, build_attention("sliding_window", window=2)).eval()


def ids(rows: int, columns: int) -> torch.Tensor:
    return torch.randint(0, 8, (rows, columns), generator=torch.Generator().manual_seed(rows))


@torch.inference_mode()
def decode(cache: LitSparseCache, tokens: torch.Tensor, prompt: int, mask=None) -> torch.Tensor:
    """Logits of a prompt of ``prompt`` columns, then one column at a time."""
    columns = tokens.shape[1]
    logits = [cache.forward(tokens[:, :prompt], None if mask is None else mask[:, :prompt], None)]
    for t in range(prompt, columns):
        step_mask = None if mask is None else mask[:, : t + 1]
        logits.append(cache.forward(tokens[:, t : t + 1], step_mask, None))
    return torch.cat(logits, dim=1)


def test_steps_after_the_prompt_give_the_full_forwards_logits(network):
    tokens = ids(2, 11)
    cache = LitSparseCache(network)  # no length: built for the prompt, then rebuilt twice
    got = decode(cache, tokens, prompt=3)
    with torch.inference_mode():
        torch.testing.assert_close(got, network(tokens), rtol=0, atol=1e-5)
    assert cache.max_length == 12 and cache.seen == 11
    assert cache.get_max_length() == 3 and cache.describe() == "1 layers: ring of 3 rows"


def test_left_padded_rows_decode_as_if_alone(network):
    tokens = ids(3, 7)
    mask = torch.ones_like(tokens)
    mask[0, :2] = 0  # row 0: two pad columns
    mask[2, :1] = 0
    got = decode(LitSparseCache(network, max_length=7), tokens, prompt=4, mask=mask)
    with torch.inference_mode():
        for row in range(3):
            left = int((mask[row] == 0).sum())
            alone = network(tokens[row : row + 1, left:])[0]
            torch.testing.assert_close(got[row, left:], alone, rtol=0, atol=1e-5)


def test_rows_picked_and_repeated_go_on_as_their_rows(network):
    tokens = ids(2, 6)
    cache = LitSparseCache(network)
    with torch.inference_mode():
        cache.forward(tokens[:, :4], None, None)
        cache.select_rows(torch.tensor([1, 1, 0]))
        repeated = tokens[[1, 1, 0]]
        got = cache.forward(repeated[:, 4:5], None, None)
        torch.testing.assert_close(got[:, 0], network(repeated[:, :5])[:, -1], rtol=0, atol=1e-5)
    with pytest.raises(ConfigError, match=r"^input_ids: 2 rows, but the cache holds 3$"):
        cache.forward(tokens[:, 5:6], None, None)
    cache.reset()
    assert (cache.groups, cache.seen, cache.max_length) == ([], 0, None)


def test_calls_it_cannot_serve_are_one_line(network):
    tokens = ids(2, 6)
    fixed = LitSparseCache(network, max_length=5)
    with (
        torch.inference_mode(),
        pytest.raises(ConfigError, match="built for 5 columns and this call goes to 6"),
    ):
        decode(fixed, tokens, prompt=4)
    right = torch.ones_like(tokens)
    right[0, 3:] = 0
    with torch.inference_mode(), pytest.raises(ConfigError, match=f"^{re.escape(RIGHT_PADDED)}"):
        decode(LitSparseCache(network), tokens, prompt=4, mask=right)
    changed = torch.ones_like(tokens)
    cache = LitSparseCache(network)
    with torch.inference_mode():
        cache.forward(tokens[:, :4], changed[:, :4], None)
        changed[1, 0] = 0  # the prompt's padding changed after the prompt
        with pytest.raises(ConfigError, match="the padding must stay as the prompt had it"):
            cache.forward(tokens[:, 4:5], changed[:, :5], None)


def test_a_dense_layer_keeps_the_whole_past(network):
    dense = LanguageModel(TINY, build_attention("dense")).eval()
    cache = LitSparseCache(dense)
    with torch.inference_mode():
        cache.forward(ids(1, 4), None, None)
    assert cache.get_max_length() == -1 and cache.layers[0].get_max_length() == -1
