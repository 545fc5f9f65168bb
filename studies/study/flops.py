"""Forward FLOPs per predicted token of a model's shape, by term (attention scores, attention
mixing, projections, MLP, LM head), dense against the config's attention
(:func:`lit_sparse.evaluation.forward_flops_per_token`), with the dense total checked against
Lightning's ``measure_flops`` (torch's FlopCounterMode on the meta device)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from lit_sparse import ConfigError, ModelConfig
from lit_sparse.attention import DenseAttention
from lit_sparse.evaluation import FlopsBreakdown, forward_flops_per_token, keys_per_query
from lit_sparse.io import markdown_table
from lit_sparse.parsing import ModelSpec

__all__ = ["FlopsReport", "flops_report", "measured_dense_flops"]

TERMS = (
    ("attention_scores", "attention scores"),
    ("attention_mixing", "attention mixing"),
    ("projections", "projections (q, k, v, o)"),
    ("mlp", "MLP (SwiGLU)"),
    ("lm_head", "LM head"),
    ("total", "total"),
)


def spec_keys(spec: ModelSpec, length: int) -> list[int]:
    """Key slots per query of every layer (``keys_per_query`` of the spec's patterns)."""
    holder = SimpleNamespace(config=spec.arch, patterns=spec.patterns())
    return keys_per_query(holder, length)


def measured_dense_flops(arch: ModelConfig, length: int, batch: int = 1) -> float:
    """Forward FLOPs per token of the dense model as Lightning's ``measure_flops`` counts
    them (torch's flop counter over a forward on the meta device: nothing is allocated)."""
    import torch
    from lightning.fabric.utilities.throughput import measure_flops

    from lit_sparse import LanguageModel

    with torch.device("meta"):
        model = LanguageModel(arch, DenseAttention(backend="sdpa"))
        x = torch.zeros(batch, length, dtype=torch.long)
    return measure_flops(model, lambda: model(x)) / (batch * length)


class FlopsReport:
    """Dense and sparse forward FLOPs per token of one model shape at one length."""

    def __init__(self, spec: ModelSpec, length: int, measured: float | None):
        self.spec, self.length, self.measured = spec, length, measured
        self.sparse_keys = spec_keys(spec, length)
        self.dense_keys = [length] * spec.arch.n_layers
        self.dense: FlopsBreakdown = forward_flops_per_token(spec.arch, self.dense_keys)
        self.sparse: FlopsBreakdown = forward_flops_per_token(spec.arch, self.sparse_keys)

    @property
    def is_dense(self) -> bool:
        return self.sparse_keys == self.dense_keys

    @property
    def paper_estimate(self) -> float:
        """The paper's count: 2 x non-embedding parameters (no attention scores, no head)."""
        arch = self.spec.arch
        per_layer = (
            arch.d_model * (2 * arch.n_heads + 2 * arch.n_kv_heads) * arch.head_dim
            + 3 * arch.d_model * arch.ffn_width
            + 2 * arch.d_model
        )
        return 2.0 * (arch.n_layers * per_layer + arch.d_model)

    def as_dict(self) -> dict[str, Any]:
        return {
            "configs": self.spec.configs,
            "attention": self.spec.describe(),
            "length": self.length,
            "keys_per_query": {"dense": self.dense_keys, "sparse": self.sparse_keys},
            "dense": self.dense.as_dict(),
            "sparse": self.sparse.as_dict(),
            "paper_estimate": self.paper_estimate,
            "measure_flops_dense": self.measured,
        }

    def to_text(self) -> str:
        arch = self.spec.arch
        head = (
            f"forward FLOPs per token at T={self.length}: {arch.n_layers} layers, d_model "
            f"{arch.d_model}, {arch.n_heads} heads / {arch.n_kv_heads} KV heads, vocab "
            f"{arch.vocab_size}"
        )
        name = self.spec.describe()
        rows = []
        for key, label in TERMS:
            dense, sparse = self.dense.as_dict()[key], self.sparse.as_dict()[key]
            rows.append([label, _num(dense), _num(sparse), f"{sparse / dense:.4f}"])
        mean = sum(self.sparse_keys) / len(self.sparse_keys)
        rows.append(["keys per query (mean)", f"{self.length}", f"{mean:g}", ""])
        table = markdown_table(["term", "dense", name, "sparse/dense"], rows, align="lrrr")
        lines = [head, "", table]
        if len(set(self.sparse_keys)) > 1:
            lines.append(f"keys per query by layer: {self.sparse_keys}")
        lines.append(
            f"training step (forward + backward) = 3 x forward: dense {_num(3 * self.dense.total)}"
            f", {name} {_num(3 * self.sparse.total)} per token"
        )
        lines.append(
            f"the paper's estimate, 2 x non-embedding parameters (no scores, no LM head): "
            f"{_num(self.paper_estimate)}"
        )
        if self.measured is not None:
            diff = 100.0 * (self.dense.total / self.measured - 1.0)
            lines.append(
                f"check: Lightning measure_flops on the dense model (meta device) = "
                f"{_num(self.measured)} per token; ours {_num(self.dense.total)} ({diff:+.3f} %)"
            )
        return "\n".join(lines)


def _num(value: float) -> str:
    return f"{value:,.0f}"


def flops_report(spec: ModelSpec, length: int | None = None, check: bool = True) -> FlopsReport:
    length = spec.seq_len if length is None else length
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ConfigError(f"--length={length!r}: expected a positive integer")
    measured = measured_dense_flops(spec.arch, length) if check else None
    return FlopsReport(spec, length, measured)
