"""FSDP2 sharding of the network (lit_sparse.sharding) in this process: a one-process gloo
group, where fully_shard runs as it does on N processes (tests/reliability/test_fsdp2_runs.py
trains on two)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from lit_sparse.config import ModelConfig
from lit_sparse.model import LanguageModel
from lit_sparse.sharding import full_state_dict, gathered, mixed_precision, shard_model

LEARNED = {"class_path": "fibonacci", "init_args": {"window": 2, "schedule": "learned"}}


@pytest.fixture(scope="module")
def mesh():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,))
    dist.destroy_process_group()


def _model(seed: int = 0) -> LanguageModel:
    torch.manual_seed(seed)
    arch = ModelConfig(
        vocab_size=64, context_length=16, n_layers=2, d_model=16, n_heads=2, n_kv_heads=1,
        head_dim=8,
    )  # fmt: skip
    return LanguageModel(arch, LEARNED)


def test_a_sharded_model_computes_what_the_model_does(mesh):
    """Every weight a DTensor shard but each layer's scalar theta (whole on every process:
    fully_shard refuses scalars); the same logits and gradients as the unsharded model."""
    plain, sharded = _model(), _model()
    shard_model(sharded, sharded.blocks, mesh, mixed_precision("32-true", "cpu"))
    for name, param in sharded.named_parameters():
        assert isinstance(param, DTensor) != name.endswith("theta"), name
    idx = torch.randint(0, 64, (2, 16))
    expected, found = plain(idx), sharded(idx)
    torch.testing.assert_close(found, expected)
    expected.square().mean().backward()
    found.square().mean().backward()
    theta = "blocks.1.attn.pattern.theta"
    torch.testing.assert_close(sharded.get_parameter(theta).grad, plain.get_parameter(theta).grad)
    torch.testing.assert_close(
        sharded.embedding.weight.grad.full_tensor(), plain.embedding.weight.grad
    )


def test_the_sparse_label_path_computes_what_the_model_does(mesh):
    """The recall tasks' loss: ``features``, then the tied output layer at the labelled
    positions only (``features`` enters the sharded network as ``forward`` does)."""
    plain, sharded = _model(), _model()
    shard_model(sharded, sharded.blocks, mesh, mixed_precision("32-true", "cpu"))
    idx = torch.randint(0, 64, (2, 16))
    mask = torch.rand(2, 16) < 0.3
    for _ in range(2):  # the second time after the first backward resharded the weights
        expected = plain.head(plain.features(idx)[mask])
        found = sharded.head(sharded.features(idx)[mask])
        torch.testing.assert_close(found, expected)
        expected.square().mean().backward()
        found.square().mean().backward()
    for name, param in plain.named_parameters():
        grad = sharded.get_parameter(name).grad
        grad = grad.full_tensor() if isinstance(grad, DTensor) else grad
        torch.testing.assert_close(grad, param.grad, msg=name)


def test_gathered_holds_the_whole_weights_then_shards_them_again(mesh):
    model = _model()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    shard_model(model, model.blocks, mesh, mixed_precision("32-true", "cpu"))
    with gathered(model), gathered(model):  # re-entered: one gather
        assert not any(isinstance(p, DTensor) for p in model.parameters())
        with torch.inference_mode():
            model(torch.randint(0, 64, (1, 8)))
    assert isinstance(model.embedding.weight, DTensor)
    whole = full_state_dict(model)
    assert whole.keys() == state.keys()
    for key, value in state.items():
        torch.testing.assert_close(whole[key], value, msg=key)


def test_the_policy_follows_the_precision():
    bf16 = mixed_precision("bf16-mixed", "cuda")
    assert (bf16.param_dtype, bf16.reduce_dtype) == (torch.bfloat16, torch.float32)
    for precision, device in (("bf16-mixed", "cpu"), ("32-true", "cuda"), (None, "cpu")):
        policy = mixed_precision(precision, device)
        assert policy.param_dtype is None and policy.reduce_dtype is None
