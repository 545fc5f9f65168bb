"""``LitSparseForCausalLM``: lit_sparse's ``LanguageModel`` as a transformers causal LM, its
modules under their own names (the state dicts match key for key). ``from_pretrained`` runs
``load_pretrained``'s checks; ``save_pretrained`` records the weights' digest and shape."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from lit_sparse.attention import build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.errors import ConfigError
from lit_sparse.formats import pretrained
from lit_sparse.formats.remote import AUTO_MAP, REMOTE_CODE
from lit_sparse.interop.hf.cache import RIGHT_PADDED, LitSparseCache
from lit_sparse.interop.hf.configuration import LitSparseConfig
from lit_sparse.interop.hf.padding import check_positions, padded_forward, row_layout
from lit_sparse.io.atomic import write_text
from lit_sparse.model import LanguageModel, RMSNorm, RotaryEmbedding

try:  # transformers 5: init functions that skip a tensor the checkpoint already filled
    from transformers import initialization as init
except ImportError:  # transformers 4 initialises only the modules a checkpoint lacks
    from torch.nn import init

CACHE_ARGUMENT = (
    "cache"
    if "cache" in inspect.signature(GenerationMixin.prepare_inputs_for_generation).parameters
    else "past_key_values"
)
"""generate's name for the cache: ``cache`` from transformers 5.2x, else ``past_key_values``."""
_OUTPUT_CACHE = (
    "cache"
    if "cache" in {f.name for f in dataclasses.fields(CausalLMOutputWithPast)}
    else "past_key_values"
)


class LitSparsePreTrainedModel(PreTrainedModel):
    """transformers' loading, saving and weight initialisation for lit_sparse models."""

    config_class = LitSparseConfig
    base_model_prefix = ""
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    _no_split_modules = ["Block"]
    _supports_cache_class = True
    _is_stateful = False

    def _init_weights(self, module) -> None:
        """lit_sparse's initialisation for what transformers initialises (missing tensors, new
        embedding rows), and RoPE's unsaved table."""
        arch = self.config.model_config
        if isinstance(module, RotaryEmbedding):
            with torch.device("cpu"):
                inv_freq = RotaryEmbedding(arch.head_dim, arch.rope_theta).inv_freq
            device = module.inv_freq.device
            module.inv_freq = inv_freq.to("cpu" if device.type == "meta" else device)
            module._tables.clear()
            module._step = None
        elif isinstance(module, (nn.Linear, nn.Embedding)):
            residual = any(module is out for out in self._residual_outs())
            std = arch.std / math.sqrt(2 * arch.n_layers) if residual else arch.std
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, RMSNorm):
            init.ones_(module.weight)

    def _residual_outs(self):
        """The layers that write into the residual stream: attention's and the MLP's output."""
        for block in getattr(self, "blocks", ()):
            yield block.attn.o_proj
            if block.ffn is not None:
                yield block.ffn.down


class LitSparseForCausalLM(LitSparsePreTrainedModel, GenerationMixin):
    """A lit_sparse language model (any attention plugin) for transformers: ``from_pretrained``,
    ``generate`` with the pattern's bounded cache, pipelines.

    >>> model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    >>> model.generate(input_ids, max_new_tokens=50)"""

    def __init__(self, config: LitSparseConfig):
        super().__init__(config)
        network = LanguageModel(config.model_config, build_attention(config.attention))
        # the network's modules are this model's: one state dict, one set of weights
        self.embedding, self.blocks, self.norm = network.embedding, network.blocks, network.norm
        self._network = (network,)  # a tuple: not registered a second time
        self.post_init()

    @classmethod
    def from_pretrained(
        cls, pretrained_model_name_or_path, *model_args, verify_weights: bool = True, **kwargs
    ):
        """transformers' ``from_pretrained`` after ``load_pretrained``'s checks (config, sha256s,
        shape); ``verify_weights=False`` skips the sha256s (files changed on purpose)."""
        name = str(pretrained_model_name_or_path)
        raw = _verify(pretrained_model_name_or_path, kwargs, verify_weights)
        model = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if raw is not None:
            pretrained.warn_attention_changes(name, raw, model.config.attention)
            if isinstance(raw.get(pretrained.TRAINED_ATTENTION), dict):
                model.network.trained_attention = raw[pretrained.TRAINED_ATTENTION]
        return model

    @property
    def network(self) -> LanguageModel:
        """The wrapped ``lit_sparse.LanguageModel`` (the same modules and weights)."""
        return self._network[0]

    @classmethod
    def from_network(cls, network: LanguageModel, **config) -> LitSparseForCausalLM:
        """A transformers model with a copy of ``network``'s weights and extra ``config`` keys."""
        model = cls(LitSparseConfig.from_network(network, **config))
        model.load_state_dict(network.state_dict())
        weight = network.embedding.weight
        return model.to(device=weight.device, dtype=weight.dtype).train(network.training)

    def get_input_embeddings(self):
        return self.embedding

    def resize_token_embeddings(self, *args, **kwargs):
        """transformers' resize, and the shape (``arch``, the network's config) follows."""
        result = super().resize_token_embeddings(*args, **kwargs)
        self._sync_shape()
        return result

    def _sync_shape(self) -> None:
        """Update ``config.arch``, the shape keys and the network's config from the live modules."""
        arch = {
            **self.config.arch,
            "vocab_size": self.embedding.num_embeddings,
            "d_model": self.embedding.embedding_dim,
            "n_layers": len(self.blocks),
        }
        if arch == self.config.arch:
            return
        self.network.config = shape = ModelConfig.from_dict(arch)
        self.config.set_shape(shape)

    def set_input_embeddings(self, value) -> None:
        self.embedding = self.network.embedding = value

    def get_output_embeddings(self):
        return None  # the head is the embedding itself (tied), with no module of its own

    def new_cache(self, max_length: int | None = None) -> LitSparseCache:
        """An empty cache for sequences of up to ``max_length`` columns (it grows past)."""
        return LitSparseCache(self.network, max_length)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        past_key_values: LitSparseCache | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        logits_to_keep: int | Tensor = 0,
        cache: LitSparseCache | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        """Next-token logits (B, n, vocab) of ``input_ids`` (B, n).

        Args:
            attention_mask: (B, columns) 1 for tokens, 0 for padding, left or right; each row is
                computed as if alone (logits at pad columns are 0).
            position_ids: optional; each row's tokens must be at 0, 1, 2, ... from its first.
            past_key_values: a :class:`LitSparseCache` to continue (transformers 5: ``cache``).
            labels: (B, n) targets; the loss is the mean cross-entropy of ``logits[:, :-1]``
                against ``labels[:, 1:]``, -100 ignored.
            use_cache: return a new cache when none is given (default: no).
            kwargs: ``cache_position`` (checked against the cache's length); loss options.
        """
        cache = cache if cache is not None else past_key_values
        if input_ids is None or inputs_embeds is not None:
            raise ConfigError(
                "inputs_embeds: lit_sparse models take input_ids only (their embedding is "
                "part of the attention pattern's decoding)"
            )
        if output_attentions or output_hidden_states:
            raise ConfigError(
                "output_attentions / output_hidden_states: lit_sparse models return logits "
                "(and a loss) only"
            )
        if cache is not None and not isinstance(cache, LitSparseCache):
            raise ConfigError(
                f"past_key_values: a {type(cache).__name__}; lit_sparse models decode with "
                "their own cache (LitSparseCache, model.new_cache()): leave it out and "
                "generate builds one"
            )
        position = kwargs.pop("cache_position", None)
        start = 0 if cache is None else cache.get_seq_length()
        if position is not None and int(position.reshape(-1)[0]) != start:
            raise ConfigError(
                f"cache_position starts at {int(position.reshape(-1)[0])}, but the cache holds "
                f"{start} columns: a lit_sparse cache continues where it ended"
            )
        if cache is None and use_cache:
            cache = self.new_cache()
        batch, n = input_ids.shape
        if cache is None:
            layout = row_layout(attention_mask, batch, n)
            check_positions(position_ids, layout, 0)
            logits = padded_forward(self.network, input_ids, layout)
        else:
            logits = cache.forward(input_ids, attention_mask, position_ids)
        loss = None
        if labels is not None:
            loss = self.loss_function(
                logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs
            )
        keep = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = logits[:, keep]  # 0: every position
        output = CausalLMOutputWithPast(loss=loss, logits=logits, **{_OUTPUT_CACHE: cache})
        return output if return_dict is not False else output.to_tuple()

    def _prepare_cache_for_generation(self, generation_config, model_kwargs, *args, **kwargs):
        """A :class:`LitSparseCache` for prompt and new tokens, unless given or turned off."""
        given = model_kwargs.get(CACHE_ARGUMENT)
        if given is not None:
            if not isinstance(given, LitSparseCache):
                raise ConfigError(
                    f"{CACHE_ARGUMENT}: a {type(given).__name__}; lit_sparse models decode with "
                    "their own cache (model.new_cache()), or leave it out"
                )
            return super()._prepare_cache_for_generation(
                generation_config, model_kwargs, *args, **kwargs
            )
        if generation_config.use_cache is False:
            return None
        mask = model_kwargs.get("attention_mask")
        if mask is not None and mask.dim() == 2:  # refused before the prompt runs
            if row_layout(mask, mask.shape[0], mask.shape[1]).right_padded:
                raise ConfigError(RIGHT_PADDED)
        implementation = generation_config.cache_implementation
        if implementation not in (None, "dynamic"):
            raise ConfigError(
                f"cache_implementation={implementation!r}: lit_sparse models decode with "
                "their own cache (each attention pattern's); leave cache_implementation out"
            )
        model_kwargs[CACHE_ARGUMENT] = self.new_cache(generation_config.max_length)
        return None

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' ``save_pretrained`` plus remote code, ``auto_map``, the live shape and
        the weights' sha256 (so a fine-tune loads in lit_sparse)."""
        self._sync_shape()
        result = super().save_pretrained(save_directory, *args, **kwargs)
        folder = Path(save_directory)
        config_path = folder / pretrained.CONFIG_FILE
        if config_path.is_file() and kwargs.get("is_main_process", True):
            config = json.loads(config_path.read_text())
            config["auto_map"] = dict(AUTO_MAP)
            weights = folder / pretrained.WEIGHTS_FILE
            if weights.is_file():  # one file (lit_sparse reads no other)
                config[pretrained.WEIGHTS_SHA256] = pretrained.file_sha256(weights)
            else:
                config.pop(pretrained.WEIGHTS_SHA256, None)
            write_text(config_path, json.dumps(config, indent=2, sort_keys=True) + "\n")
            for name, text in REMOTE_CODE.items():
                write_text(folder / name, text)
        return result


def _resolve(name: str, filename: str, kwargs: dict[str, Any]) -> str | None:
    """The local path of ``filename`` in the folder or hub repository, else None."""
    from transformers.utils import cached_file

    hub = ("cache_dir", "force_download", "local_files_only", "token", "revision", "subfolder")
    options = {key: kwargs[key] for key in hub if kwargs.get(key) is not None}
    try:
        return cached_file(name, filename, _raise_exceptions_for_missing_entries=False, **options)
    except (OSError, ValueError):
        return None


def _verify(name_or_path, kwargs: dict[str, Any], verify_weights: bool) -> dict | None:
    """``load_pretrained``'s checks on the folder ``from_pretrained`` reads; its config.json (None:
    nothing checked, e.g. a state dict, sharded or ``.bin`` weights)."""
    if name_or_path is None or kwargs.get("state_dict") is not None:
        return None
    name = str(name_or_path)
    config_path, weights = (
        _resolve(name, f, kwargs) for f in (pretrained.CONFIG_FILE, pretrained.WEIGHTS_FILE)
    )
    if config_path is None or weights is None:
        return None
    raw = pretrained.read_config(Path(config_path).parent)
    pretrained.check_model_keys(raw, name)
    config = kwargs.get("config")
    if not isinstance(config, LitSparseConfig):  # the Auto classes pass the one they built
        config = LitSparseConfig.from_dict(raw)
    if verify_weights:
        pretrained.check_weights_digest(weights, raw)
        tokenizer = isinstance(raw.get(pretrained.TOKENIZER_SHA256), str) and _resolve(
            name, pretrained.TOKENIZER_FILE, kwargs
        )
        if tokenizer:
            from lit_sparse.data.tokenizer import load_tokenizer

            pretrained.check_tokenizer_digest(
                tokenizer,
                raw,
                load_tokenizer(str(tokenizer)).sha256,
                option="from_pretrained(..., verify_weights=False)",
            )
    with torch.device("meta"):  # the shapes the config builds, with no memory
        network = LanguageModel(config.model_config, build_attention(config.attention))
    expected = {key: tuple(t.shape) for key, t in network.state_dict().items()}
    pretrained.check_fit(expected, pretrained.weight_shapes(weights), name)
    return raw
