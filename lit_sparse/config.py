"""The model's shape: a dataclass of plain values with the paper's defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from numbers import Real

from lit_sparse.errors import ConfigError


def _number(value, kind: type = Real) -> bool:
    """A number of ``kind``; a bool is none (Python counts True as the int 1)."""
    return isinstance(value, kind) and not isinstance(value, bool)


@dataclass
class ModelConfig:
    """Decoder-only transformer shape. Defaults are the paper's 60.85M-parameter model."""

    vocab_size: int = 32768
    """Embedding rows (the tokenizer's vocabulary, padded)."""
    context_length: int = 1024
    """Training length T; RoPE tables are rebuilt for any other length."""
    n_layers: int = 16
    """Transformer blocks L."""
    d_model: int = 512
    """Residual width."""
    n_heads: int = 8
    """Query heads."""
    n_kv_heads: int = 2
    """Key/value heads (grouped-query attention); must divide n_heads."""
    head_dim: int = 64
    """Width of one head; n_heads * head_dim must equal d_model."""
    ffn_hidden: int | None = None
    """SwiGLU hidden width; None: int(d_model * 8 / 3) rounded up to even (1366 at 512);
    0: attention-only blocks (no MLP). ``ffn_width`` is the value in use."""
    norm_eps: float = 1e-6
    """RMSNorm epsilon."""
    rope_theta: float = 10000.0
    """RoPE base."""
    init_std: float | None = None
    """Std of every Linear and the embedding; None: d_model ** -0.5 (``std``: in use).
    Residual output projections use init_std / sqrt(2 * n_layers)."""

    def __post_init__(self):
        for field in fields(self):  # the sizes (typed int) are positive, the floats > 0
            name, value = field.name, getattr(self, field.name)
            if field.type == "int" and not (_number(value, int) and value > 0):
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
            if (
                field.type.startswith("float")
                and value is not None
                and not (_number(value) and value > 0)
            ):
                raise ConfigError(f"{name} must be > 0, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ConfigError(
                f"n_heads ({self.n_heads}) must be divisible by n_kv_heads ({self.n_kv_heads})"
            )
        if self.n_heads * self.head_dim != self.d_model:
            raise ConfigError(
                f"d_model ({self.d_model}) must equal n_heads x head_dim "
                f"({self.n_heads} x {self.head_dim} = {self.n_heads * self.head_dim})"
            )
        if self.head_dim % 2:
            raise ConfigError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.ffn_hidden is not None and not (
            _number(self.ffn_hidden, int) and self.ffn_hidden >= 0
        ):
            raise ConfigError(
                f"ffn_hidden must be an integer >= 0 (0: no MLP) or None (the default width), "
                f"got {self.ffn_hidden!r}"
            )

    # derived values are properties, so a default stays one when d_model changes in a layer
    @property
    def ffn_width(self) -> int:
        """The SwiGLU hidden width in use."""
        if self.ffn_hidden is not None:
            return self.ffn_hidden
        hidden = int(self.d_model * 8 / 3)
        return hidden + hidden % 2

    @property
    def std(self) -> float:
        """The init standard deviation in use."""
        return self.d_model**-0.5 if self.init_std is None else self.init_std

    @property
    def n_groups(self) -> int:
        """Query heads per key/value head."""
        return self.n_heads // self.n_kv_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ConfigError(
                f"ModelConfig: unknown fields {sorted(unknown)}; known: {sorted(known)}"
            )
        return cls(**values)
