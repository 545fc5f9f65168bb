"""``bench decode --transformers``: transformers' own ``generate`` on the bench's model, one
token after a long context, beside lit_sparse's decoding step.

Rows (the names are the bench's plugin names):

- ``hf_fibonacci``: ``LitSparseForCausalLM.generate`` with fibonacci's weights, through the
  pattern's own cache (``LitSparseCache``: a ring of the largest distance + 1 rows);
- ``hf_llama_dense``: the dense model exported as a stock ``LlamaForCausalLM``, through
  transformers' ``DynamicCache`` (the whole past);
- ``hf_mistral_sliding``: the sliding-window model as a stock ``MistralForCausalLM``, through
  its sliding-window ``DynamicCache`` (the last ``sliding_window - 1`` rows).

A context of C tokens is not computed: the cache is filled with random keys and values as if
C tokens had been decoded, then ``generate`` continues from it (its input ids are the C + 1
columns; it runs the one uncached column and goes on). Each timed call generates
``round_tokens`` tokens; a stopping criterion stamps the time as each token is appended, and
the gaps between stamps are the per-token times (one iteration of generate's loop: its input
preparation, the forward, the logits processors and the stopping checks; the first token of
a call, which carries generate's setup, is not counted).
"""

from __future__ import annotations

import time

import torch

__all__ = ["TRANSFORMERS_ROWS", "TransformersRow"]

TRANSFORMERS_ROWS = ("hf_fibonacci", "hf_llama_dense", "hf_mistral_sliding")
_SOURCE = {
    "hf_fibonacci": "fibonacci",
    "hf_llama_dense": "dense",
    "hf_mistral_sliding": "sliding_window",
}
_LAYOUT = {"hf_llama_dense": "llama", "hf_mistral_sliding": "mistral"}


class _Stamps:
    """A stopping criterion that never stops and stamps the time of every token."""

    def __init__(self):
        self.times: list[float] = []

    def __call__(self, input_ids, scores, **kwargs):
        self.times.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class TransformersRow:
    """One transformers row at one context: the model, its filled cache and the growing
    input ids; ``round()`` generates ``tokens`` tokens and returns the per-token seconds."""

    def __init__(self, name: str, network, context: int, total_tokens: int, seed: int = 0):
        from transformers import StoppingCriteriaList

        self.name = name
        self.model = _transformers_model(name, network).eval()
        self.model.generation_config.eos_token_id = None
        self.model.generation_config.pad_token_id = 0
        self.cache = _filled_cache(self.model, name, network, context, total_tokens, seed)
        self.input_ids = torch.zeros(1, context + 1, dtype=torch.long)
        self.stamps = _Stamps()
        self.criteria = StoppingCriteriaList([self.stamps])

    def round(self, tokens: int) -> list[float]:
        from lit_sparse.interop.hf import CACHE_ARGUMENT

        self.stamps.times = []
        with torch.inference_mode():
            self.input_ids = self.model.generate(
                self.input_ids,
                attention_mask=torch.ones_like(self.input_ids),
                do_sample=False,
                max_new_tokens=tokens,
                min_new_tokens=tokens,
                stopping_criteria=self.criteria,
                **{CACHE_ARGUMENT: self.cache},
            )
        times = self.stamps.times
        return [b - a for a, b in zip(times, times[1:], strict=False)]

    @property
    def cache_mb(self) -> float:
        if hasattr(self.cache, "nbytes"):  # LitSparseCache
            return self.cache.nbytes / 2**20
        return sum(layer.keys.nbytes + layer.values.nbytes for layer in self.cache.layers) / 2**20

    def describe(self) -> str:
        if hasattr(self.cache, "describe"):
            return f"LitSparseCache: {self.cache.describe()}"
        rows = self.cache.layers[0].keys.shape[-2]
        return f"{type(self.cache).__name__}: {rows} rows a layer"


def _transformers_model(name: str, network):
    from lit_sparse.interop.hf import LitSparseForCausalLM

    if name == "hf_fibonacci":
        return LitSparseForCausalLM.from_network(network)
    from transformers import AutoConfig, AutoModelForCausalLM

    from lit_sparse.formats import stock_config, to_stock_names

    layout = _LAYOUT[name]
    keys = {"format": "", "arch": {}, "attention": network.attention.to_config()}
    fields = stock_config(layout, network.config, keys)
    fields = {
        k: v for k, v in fields.items() if k not in ("architectures", "model_type", "lit_sparse")
    }
    config = AutoConfig.for_model(layout, **fields)
    model = AutoModelForCausalLM.from_config(config)
    state = to_stock_names(network.state_dict(), network.config.n_layers)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise RuntimeError(f"{name}: weights do not fit ({missing}, {unexpected})")
    model.tie_weights()
    return model


def _filled_cache(model, name: str, network, context: int, total_tokens: int, seed: int):
    if name == "hf_fibonacci":
        cache = model.new_cache(context + total_tokens + 2)
        cache.fill_random(1, context, seed)
        return cache
    from transformers import DynamicCache

    config = network.config
    cache = DynamicCache(config=model.config)
    generator = torch.Generator().manual_seed(seed)
    shape = (1, config.n_kv_heads, context, config.head_dim)
    for layer in range(config.n_layers):
        keys, values = (torch.randn(shape, generator=generator) for _ in range(2))
        cache.update(keys, values, layer)
    return cache


def source_plugin(name: str) -> str:
    """The bench plugin whose model a transformers row runs."""
    return _SOURCE[name]
