"""``bench train``'s rows: whole AdamW training steps of a model shape, per plugin."""

from __future__ import annotations

from typing import Any

from lit_sparse_studies.bench.attention import build_plugin

__all__ = ["COMPILED", "TRAIN_SHAPES", "train_case", "train_batch"]


def _recall_shape(n_layers: int, d_model: int, task: dict[str, Any], batch: int, length: int):
    """A recall study's model (attention alone, one head as wide as the model, V = 512) and
    its task: the loss and the output layer at the labelled positions only, as the study's."""
    model = {"vocab_size": 512, "n_layers": n_layers, "d_model": d_model, "n_heads": 1}
    model |= {"n_kv_heads": 1, "ffn_hidden": 0}
    return {**model, "task": task, "batch": batch, "length": length}


TRAIN_SHAPES = {
    # a small model (the default): 4 layers, d_model 128
    "small": {"vocab_size": 8192, "n_layers": 4, "d_model": 128, "n_heads": 4, "n_kv_heads": 2},
    # the paper's (docs/paper.md section 2): 16 layers, d_model 512, 8/2 heads of 64
    "paper": {"vocab_size": 32768, "n_layers": 16, "d_model": 512, "n_heads": 8, "n_kv_heads": 2},
    # the recall study's steps (configs/study/recall/*.yaml), each at its own T and batch
    "mqar128": _recall_shape(2, 128, {"kind": "mqar", "kv": 8, "gap": 0}, 256, 128),
    "distance": _recall_shape(5, 64, {"kind": "distance"}, 64, 256),
    "far_mqar": _recall_shape(3, 128, {"kind": "mqar", "kv": 8, "gap": 96}, 256, 256),
}
"""``bench train --shape``: the model trained in each step (and for the recall study's
shapes, its task, batch and length)."""

COMPILED = "+compile"
"""The suffix of a row whose network's forward runs through ``torch.compile``
(``bench train --compile``; the first, compiling call is not timed)."""


def _recall_batch(task: dict[str, Any], batch: int, length: int, vocab: int):
    """One training batch (inputs, labels) of a recall task, seeded."""
    import numpy as np

    from lit_sparse.tasks import distance_retrieval, multiquery_ar

    if task["kind"] == "mqar":
        return multiquery_ar(batch, length, task["kv"], vocab, seed=0, gap=task["gap"])
    distances = np.random.default_rng(0).integers(2, length - 1, size=batch)
    return distance_retrieval(batch, length, distances, vocab, seed=0, values_in_filler=False)


def train_case(spec: dict[str, Any]):
    import torch
    import torch.nn.functional as F

    from lit_sparse import LanguageModel, ModelConfig
    from lit_sparse.runs import keep_freed_memory

    keep_freed_memory()  # as fit does
    device = torch.device(spec["device"])
    gen = torch.Generator(device="cpu").manual_seed(0)
    shape = dict(TRAIN_SHAPES[spec["shape"]])
    task = shape.pop("task", None)
    shape.pop("batch", None), shape.pop("length", None)
    plugin_name = spec["plugin"].removesuffix(COMPILED)
    compiled = spec["plugin"].endswith(COMPILED)

    def case(length: int):
        config = ModelConfig(
            context_length=length, head_dim=shape["d_model"] // shape["n_heads"], **shape
        )
        plugin = build_plugin(plugin_name, spec["window"], spec["keys"])
        torch.manual_seed(0)
        model = LanguageModel(config, plugin).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        warm_up = length != spec["length"]  # a shorter call first (rows._memory)
        batch = 1 if warm_up else spec["batch"]
        features = torch.compile(model.features, dynamic=False) if compiled else model.features
        if task is None:
            ids = torch.randint(0, shape["vocab_size"], (batch, length + 1), generator=gen)
            x, y = ids[:, :-1].to(device), ids[:, 1:].to(device)
            mask = None
        else:
            # far MQAR's gap has no room at the warm-up's length
            drawn = {**task, "gap": 0} if warm_up and "gap" in task else task
            x, y = (t.to(device) for t in _recall_batch(drawn, batch, length, shape["vocab_size"]))
            mask = y != -100

        def run():
            hidden = features(x)  # (B, T, d)
            if mask is None:
                logits, targets = model.head(hidden).flatten(0, 1), y.flatten()
            else:  # the labelled positions only: (N, d) -> (N, V)
                logits, targets = model.head(hidden[mask]), y[mask]
            loss = F.cross_entropy(logits.float(), targets)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return run

    return case, device


def train_batch(tokens_per_step: int | None, shape: str, length: int) -> int:
    """Sequences per step: ``tokens_per_step // T``, by default 8192 tokens (small shape),
    one sequence (the paper's shape) or the recall study's batch."""
    if tokens_per_step is None and shape == "paper":
        return 1
    if tokens_per_step is None and "batch" in TRAIN_SHAPES[shape]:
        return TRAIN_SHAPES[shape]["batch"]
    return max(1, (tokens_per_step or 8192) // length)
