"""``LitSparseConfig``: a folder's config.json as a transformers config. ``arch`` (``ModelConfig``
fields) and ``attention`` (the plugin) are the truth, the standard keys derive from them; a
config.json without both is refused (defaults would not be the weights')."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

from lit_sparse.attention import build_attention
from lit_sparse.config import ModelConfig
from lit_sparse.formats.pretrained import FORMAT, check_model_keys
from lit_sparse.formats.stock import shape_fields


class LitSparseConfig(PretrainedConfig):
    """A lit_sparse model's shape (``arch``), attention plugin, training length and special ids."""

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
            attention: ``{"class_path", "init_args"}`` or a registry name (default: dense).
            kwargs: transformers' own keys (``eos_token_id``, ...); shape keys come from ``arch``.
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
        """transformers' diff, always with lit_sparse's own keys and the shape keys."""
        values = super().to_diff_dict()
        keep = ("format", "arch", "attention", *shape_fields(self.model_config))
        values.update({key: getattr(self, key) for key in keep})
        return values

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs):
        """transformers' ``from_dict``, refusing a config without ``arch`` or ``attention``."""
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
