"""``LitSparseConfig``: a lit_sparse model folder's config.json as a transformers config.

The source of truth is lit_sparse's own keys, ``arch`` (the ``ModelConfig`` fields) and
``attention`` (the plugin's ``{class_path, init_args}``); the standard keys transformers
and other tools read (``hidden_size``, ``num_hidden_layers``, ``max_position_embeddings``,
...) are derived from them, so the two can never disagree. A folder saved by transformers'
``save_pretrained`` keeps every key, and ``lit_sparse.LanguageModel.from_pretrained`` reads
it like one written by lit_sparse. A config.json without ``arch`` or ``attention`` is refused
(:meth:`LitSparseConfig.from_dict`): a default shape or plugin would not be the weights'.
"""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

from lit_sparse.attention import build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.formats.pretrained import FORMAT, check_model_keys
from lit_sparse.formats.stock import shape_fields

__all__ = ["LitSparseConfig"]


class LitSparseConfig(PretrainedConfig):
    """The model shape (``arch``), the attention plugin (``attention``), the training length
    and the special token ids of a lit_sparse language model."""

    model_type = "lit_sparse"

    def __init__(
        self,
        arch: dict[str, Any] | None = None,
        attention: dict[str, Any] | str | None = None,
        **kwargs,
    ):
        """
        Args:
            arch: ``ModelConfig`` fields (default: the paper's model).
            attention: the plugin as ``{"class_path", "init_args"}`` or a registry name
                (default: dense). A plugin whose package is not installed is refused here,
                in one line naming the package.
            kwargs: transformers' own keys (``eos_token_id``, ...); the shape keys are
                recomputed from ``arch``.
        """
        shape = ModelConfig.from_dict(dict(arch or {}))
        plugin = build_attention(attention)
        plugin.check(shape.n_layers)
        for key in (*shape_fields(shape), "format"):
            kwargs.pop(key, None)
        kwargs.setdefault("tie_word_embeddings", True)
        super().__init__(**kwargs)
        self.format = FORMAT
        self.attention = plugin.to_config()
        self.set_shape(shape)

    def set_shape(self, shape: ModelConfig) -> None:
        """``arch`` and the standard shape keys (``hidden_size``, ...), both from ``shape``."""
        self.arch = shape.to_dict()
        for key, value in shape_fields(shape).items():
            setattr(self, key, value)

    def to_diff_dict(self) -> dict[str, Any]:
        """transformers writes only the keys that differ from a default config; lit_sparse's
        own keys and the shape keys are always written (lit_sparse reads the folder too)."""
        values = super().to_diff_dict()
        keep = ("format", "arch", "attention", *shape_fields(self.model_config))
        values.update({key: getattr(self, key) for key in keep})
        return values

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs):
        """transformers' ``from_dict`` (what ``from_pretrained`` and the Auto classes build a
        config.json's config with), refusing one without ``arch`` or ``attention`` in one
        line: the defaults (the paper's 60M shape, dense attention) are not the weights'."""
        name = kwargs.get("name_or_path")  # the Auto classes pass the folder
        check_model_keys(config_dict, None if name is None else str(name))
        return super().from_dict(config_dict, **kwargs)

    @classmethod
    def from_network(cls, network, **kwargs) -> LitSparseConfig:
        """The config of a ``lit_sparse.LanguageModel`` (``kwargs``: e.g. ``eos_token_id``)."""
        return cls(arch=network.config.to_dict(), attention=network.attention.to_config(), **kwargs)

    @property
    def model_config(self) -> ModelConfig:
        """``arch`` as a ``ModelConfig``."""
        return ModelConfig.from_dict(self.arch)
