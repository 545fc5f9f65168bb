"""``bench train``'s rows: whole AdamW training steps of a model shape, per plugin."""

from __future__ import annotations

from typing import Any

from lit_sparse.bench.attention import build_plugin

__all__ = ["TRAIN_SHAPES", "train_case", "train_batch"]


TRAIN_SHAPES = {
    # a small model (the default): 4 layers, d_model 128
    "small": {"vocab_size": 8192, "n_layers": 4, "d_model": 128, "n_heads": 4, "n_kv_heads": 2},
    # the paper's (docs/paper.md section 2): 16 layers, d_model 512, 8/2 heads of 64
    "paper": {"vocab_size": 32768, "n_layers": 16, "d_model": 512, "n_heads": 8, "n_kv_heads": 2},
}
"""``bench train --shape``: the model trained in each step."""


def train_case(spec: dict[str, Any]):
    import torch
    import torch.nn.functional as F

    from lit_sparse.config import ModelConfig
    from lit_sparse.model import LanguageModel

    device = torch.device(spec["device"])
    gen = torch.Generator(device="cpu").manual_seed(0)
    shape = TRAIN_SHAPES[spec["shape"]]

    def case(length: int):
        config = ModelConfig(
            context_length=length, head_dim=shape["d_model"] // shape["n_heads"], **shape
        )
        plugin = build_plugin(spec["plugin"], spec["window"], spec["keys"])
        torch.manual_seed(0)
        model = LanguageModel(config, plugin).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        batch = spec["batch"] if length == spec["length"] else 1
        ids = torch.randint(0, shape["vocab_size"], (batch, length + 1), generator=gen).to(device)

        def run():
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return run

    return case, device


def train_batch(tokens_per_step: int | None, shape: str, length: int) -> int:
    """Sequences per step: ``tokens_per_step // T``, by default 8192 tokens (small shape) or
    one sequence (the paper's shape)."""
    if tokens_per_step is None and shape == "paper":
        return 1
    return max(1, (tokens_per_step or 8192) // length)
