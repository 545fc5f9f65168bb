"""FSDP2 for the network: each block, then the rest, ``fully_shard``-ed over the data-parallel
mesh dimension; scalars (a learned ``theta``) stay whole, their gradients averaged as DDP does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from functools import partial

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import (
    FSDPModule,
    MixedPrecisionPolicy,
    fully_shard,
    register_fsdp_forward_method,
)

from lit_sparse.errors import ConfigError

FORWARD_METHODS = ("features",)
"""Methods besides ``forward`` that enter the network (the sparse-label loss)."""


def data_parallel_mesh(mesh: DeviceMesh) -> DeviceMesh:
    """The data-parallel dimension of Lightning's 2-D mesh (tensor-parallel size must be 1)."""
    names = mesh.mesh_dim_names or ()
    if "tensor_parallel" in names and mesh["tensor_parallel"].size() != 1:
        raise ConfigError(
            f"trainer.strategy.init_args.tensor_parallel_size={mesh['tensor_parallel'].size()}: "
            "must be 1 (the network shards over data-parallel processes only, FSDP2)"
        )
    return mesh["data_parallel"] if "data_parallel" in names else mesh


def mixed_precision(precision: str | None, device_type: str) -> MixedPrecisionPolicy:
    """The blocks' FSDP2 policy: bf16 weights, float32 reductions on CUDA with bf16; else fp32."""
    if device_type == "cuda" and str(precision or "").startswith("bf16"):
        return MixedPrecisionPolicy(
            param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=False
        )
    return MixedPrecisionPolicy()


def is_sharded(model: nn.Module) -> bool:
    return isinstance(model, FSDPModule)


def _average_gradient(param: nn.Parameter, group: dist.ProcessGroup, size: int) -> None:
    """After a backward: the gradient's mean over the processes (gloo has no AVG)."""
    dist.all_reduce(param.grad, group=group)
    param.grad.div_(size)


def shard_model(
    model: nn.Module, units: Iterable[nn.Module], mesh: DeviceMesh, policy: MixedPrecisionPolicy
) -> None:
    """``fully_shard`` each of ``units``, then ``model`` (float32: residual sums) over ``mesh``."""
    scalars = {p for p in model.parameters() if p.ndim == 0}
    for unit in units:
        fully_shard(unit, mesh=mesh, mp_policy=policy, ignored_params=scalars)
    fully_shard(model, mesh=mesh, mp_policy=MixedPrecisionPolicy(), ignored_params=scalars)
    for name in FORWARD_METHODS:
        if hasattr(model, name):
            register_fsdp_forward_method(model, name)
    for param in scalars:
        if param.requires_grad:
            param.register_post_accumulate_grad_hook(
                partial(_average_gradient, group=mesh.get_group(), size=mesh.size())
            )


@contextlib.contextmanager
def gathered(model: nn.Module) -> Iterator[None]:
    """Whole weights on every process in the block, for any number of forwards (collective)."""
    if not is_sharded(model) or getattr(model, "_lit_sparse_gathered", False):
        yield
        return
    units = [m for m in model.modules() if isinstance(m, FSDPModule)]
    model.set_reshard_after_forward(False)
    with torch.inference_mode(False):  # the whole weights must not be inference tensors
        for unit in units:
            unit.unshard()
    model._lit_sparse_gathered = True
    try:
        yield
    finally:
        model._lit_sparse_gathered = False
        for unit in units:
            unit.reshard()
        model.set_reshard_after_forward(True)
        model.set_reshard_after_forward(False, recurse=False)  # the root's own default


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """``model.state_dict()`` with whole tensors on every process (collective when sharded)."""
    if not is_sharded(model):
        return model.state_dict()
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
