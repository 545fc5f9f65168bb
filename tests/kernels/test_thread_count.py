"""One thread and two give the same bits for a whole training step and for greedy decoding
(docs/performance.md, "Threads"), where the model's ops promise it: every op of a slot pattern,
the dense layers' training path, and the compiled layer step of decoding (a dense layer's
too); torch's one-query SDPA, a dense layer's step through the modules, is the exception."""

import pytest
import torch
import torch.nn.functional as F

import lit_sparse
from lit_sparse import LanguageModel, ModelConfig, build_attention
from lit_sparse.generation.sampling import Sampler
from lit_sparse.kernels.threads import usable_cores

pytestmark = [
    pytest.mark.slow,  # two training steps and two decodes of two models: about 2 s
    pytest.mark.skipif(usable_cores() < 2, reason="one usable core: 2 threads would run as 1"),
]

FIBONACCI = {"class_path": "fibonacci", "init_args": {"window": 2}}
HYBRID = {
    "class_path": "hybrid",
    "init_args": {"local_attention": FIBONACCI, "global_layers": [-1]},
}
LENGTH = 64


class RecordingSampler(Sampler):
    """Greedy, keeping every logits row it chose from."""

    def __init__(self):
        super().__init__(temperature=0)
        object.__setattr__(self, "seen", [])

    def __call__(self, logits, generator=None):
        self.seen.append(logits.clone())
        return super().__call__(logits, generator)


def step_and_decode(spec, threads: int):
    """Gradients and weights after one AdamW step, then greedy tokens and their logits."""
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        config = ModelConfig(
            vocab_size=101, context_length=LENGTH, n_layers=2, d_model=64, n_heads=4,
            n_kv_heads=2, head_dim=16,
        )  # fmt: skip
        model = LanguageModel(config, build_attention(spec))
        ids = torch.randint(0, 101, (2, LENGTH + 1), generator=torch.Generator().manual_seed(1))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        logits = model(ids[:, :-1])  # (B, T, V)
        F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten()).backward()
        grads = [p.grad.clone() for p in model.parameters()]
        optimizer.step()
        weights = [p.detach().clone() for p in model.parameters()]
        generation = lit_sparse.generate(model.eval(), ids[:, :8], 24, temperature=0)
        generation.sampler = sampler = RecordingSampler()
        tokens = generation.run()  # (B, 24)
        return grads, weights, tokens, torch.stack(sampler.seen)  # (24, B, V)
    finally:
        torch.set_num_threads(saved)


def test_a_slot_pattern_trains_and_decodes_to_the_same_bits_on_one_thread_and_two():
    grads, weights, tokens, logits = step_and_decode(FIBONACCI, 1)
    grads2, weights2, tokens2, logits2 = step_and_decode(FIBONACCI, 2)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads2, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(weights, weights2, strict=True))
    assert torch.equal(tokens, tokens2)
    assert torch.equal(logits, logits2)


def test_a_hybrid_trains_and_decodes_to_the_same_bits_on_one_thread_and_two():
    """The dense layer's training path and prefill are thread-count independent, and so is its
    compiled decoding step (a fixed order over the past's rows)."""
    grads, weights, tokens, logits = step_and_decode(HYBRID, 1)
    grads2, weights2, tokens2, logits2 = step_and_decode(HYBRID, 2)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads2, strict=True))
    assert all(torch.equal(a, b) for a, b in zip(weights, weights2, strict=True))
    assert torch.equal(tokens, tokens2)
    assert torch.equal(logits, logits2)
