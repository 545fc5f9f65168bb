"""The benched model's shape, shared by ``bench decode`` and ``bench prefill``: the paper's
by default (:class:`lit_sparse.config.ModelConfig`'s defaults, trained at its length)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from lit_sparse import ConfigError, ModelConfig

__all__ = ["ModelShape"]

PAPER = ModelConfig()


@dataclass
class ModelShape:
    """The pattern's window W and the network's shape (head_dim = d_model // n_heads)."""

    window: int = 8
    n_layers: int = PAPER.n_layers
    d_model: int = PAPER.d_model
    n_heads: int = PAPER.n_heads
    n_kv_heads: int = PAPER.n_kv_heads
    vocab_size: int = PAPER.vocab_size
    training_length: int = PAPER.context_length
    threads: int | None = None

    def check_shape(self, *counts: str) -> None:
        """ConfigError unless the shape (and the fields ``counts``, each >= 1) can be built."""
        for name in (*counts, "window", "n_layers", "d_model", "n_heads", "n_kv_heads"):
            value, least = getattr(self, name), 0 if name == "window" else 1
            if value < least:
                raise ConfigError(f"{name}={value}: must be >= {least}")
        if self.n_heads % self.n_kv_heads or self.d_model % self.n_heads:
            raise ConfigError(
                f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads} "
                f"and divide d_model={self.d_model}"
            )

    def shape(self) -> dict[str, Any]:
        """The shape's fields by name (to build another spec of the same model)."""
        return {f.name: getattr(self, f.name) for f in fields(ModelShape)}

    def model_config(self) -> ModelConfig:
        return ModelConfig(
            vocab_size=self.vocab_size,
            context_length=self.training_length,
            n_layers=self.n_layers,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            head_dim=self.d_model // self.n_heads,
        )
