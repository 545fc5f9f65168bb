"""``bench attention``'s rows: one attention call, forward + backward, per plugin.

Every sparse plugin is configured with the same keys per query (its ``bench_cases`` hook
gets them): fibonacci's window W plus its rungs; sliding_window a window of that many keys;
bigbird the window W plus 2 global and (keys - W - 3) random keys per block; natten (when
``natten_mps`` is installed) a kernel of that many keys. Inputs are laid out as the model
hands them to attention: (B, T, heads, D) tensors viewed as (B, heads, T, D); dense and
sparse get the same tensors. ``flex`` compiles FlexAttention (``torch.compile``) and builds
its block mask during the warm-up, outside the timed calls; it needs CUDA (FlexAttention has
no CPU backward). :func:`floor_bytes` is the op's unavoidable memory traffic.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DTYPES",
    "FLEX",
    "LEARNED",
    "NATTEN",
    "attention_case",
    "bench_plugins",
    "build_plugin",
    "fibonacci_keys",
    "flex_block_mask",
    "floor_bytes",
    "natten_available",
    "plugin_names",
]

LEARNED = "fibonacci_learned"
NATTEN = "natten"
FLEX = "flex"
DTYPES = ("float32", "bfloat16", "float16")


def bench_plugins(window: int, keys: int) -> dict[str, Any]:
    """Row name -> plugin: every registered plugin's ``bench_cases(keys, window)``."""
    from lit_sparse.attention.registry import all_bench_cases

    return all_bench_cases(keys, window)


def plugin_names(window: int = 12) -> list[str]:
    return list(bench_plugins(window, fibonacci_keys(window, 1024)))


def natten_available() -> bool:
    try:
        import natten_mps  # noqa: F401
    except ImportError:
        return False
    return True


def build_plugin(name: str, window: int, keys: int):
    """The plugin of row ``name``, configured to attend ``keys`` keys per query."""
    plugins = bench_plugins(window, keys)
    if name not in plugins:
        raise ValueError(f"no bench row {name!r}; rows: {', '.join(plugins)}")
    return plugins[name]


def flex_block_mask(distances, length: int, device):
    """FlexAttention's block mask for causal attention at the query - key ``distances``."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask

    allowed = torch.zeros(length, dtype=torch.bool, device=device)
    allowed[distances[distances < length].to(device)] = True

    def mask_mod(batch, head, q_index, kv_index):
        distance = q_index - kv_index
        return (distance >= 0) & allowed[distance.clamp(min=0)]

    compile_mask = torch.device(device).type == "cuda"  # the eager build is O(T^2) memory
    return create_block_mask(mask_mod, None, None, length, length, device, _compile=compile_mask)


def floor_bytes(spec: dict[str, Any]) -> int:
    """Bytes one forward + backward of attention must move at least (see module doc)."""
    import torch

    itemsize = getattr(torch, spec["dtype"]).itemsize
    heads, kv_heads = spec["heads"], spec["kv_heads"]
    per_row = 6 * (heads + kv_heads) * spec["dim"]  # fwd q k v o, bwd q k v o do dq dk dv
    return itemsize * spec["batch"] * spec["length"] * per_row


def fibonacci_keys(window: int, length: int) -> int:
    """Keys per query of fixed-alpha Fibonacci attention with ``window`` at ``length``."""
    from lit_sparse.attention import offsets

    return len(offsets.layer_distances(1.0, offsets.fibonacci_rungs(15), window, length))


_INPUTS: dict[tuple[int, str], tuple] = {}


def _inputs(spec: dict[str, Any], length: int, device):
    """q, k, v and the output's gradient at ``length``, one set per length shared by every
    plugin of the process, in the model's layout: (B, T, h, D) tensors (viewed as
    (B, h, T, D) when attention is called)."""
    import torch

    key = (length, str(device))
    if key not in _INPUTS:
        dtype = getattr(torch, spec["dtype"])
        batch, head_dim = spec["batch"], spec["dim"]
        gen = torch.Generator(device="cpu").manual_seed(length)

        def make(heads: int):
            x = torch.randn(batch, length, heads, head_dim, generator=gen) * 0.5
            return x.to(device, dtype).requires_grad_()

        grad = torch.randn(batch, length, spec["heads"], head_dim, generator=gen)
        q, k, v = make(spec["heads"]), make(spec["kv_heads"]), make(spec["kv_heads"])
        _INPUTS[key] = (q, k, v, grad.to(device, dtype))
    return _INPUTS[key]


def _natten_attend(spec: dict[str, Any]):
    """natten's causal 1-D neighborhood attention over ``keys`` keys, in its (B, T, h, D)
    layout."""
    import natten_mps

    def attend(q, k, v):
        out = natten_mps.na1d(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            kernel_size=spec["keys"],
            is_causal=True,
        )
        return out.transpose(1, 2)

    return attend, []


def _flex_attend(spec: dict[str, Any], device):
    """FlexAttention (compiled once per length) with fibonacci's mask."""
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    flex = torch.compile(flex_attention, dynamic=False)
    fibonacci = build_plugin("fibonacci", spec["window"], spec["keys"]).build(0, 16, spec["length"])
    masks = {}  # per length: the warm-up call builds (and compiles) the small one

    def attend(q, k, v):
        length = q.shape[2]
        if length not in masks:
            distances = fibonacci.slots(length, device).distances
            masks[length] = flex_block_mask(distances, length, device)
        return flex(q, k, v, block_mask=masks[length], enable_gqa=True)

    return attend, []


def _plugin_attend(spec: dict[str, Any], device):
    """The row's plugin: layer 0 of 16, built for the benched length."""
    plugin = build_plugin(spec["plugin"], spec["window"], spec["keys"])
    pattern = plugin.build(0, 16, spec["length"]).to(device)
    return pattern, list(pattern.parameters())


def attention_case(spec: dict[str, Any]):
    """(case, device): case(length) gives run() = one forward + backward at ``length``."""
    import torch

    device = torch.device(spec["device"])
    if spec["plugin"] == NATTEN:
        attend, parameters = _natten_attend(spec)
    elif spec["plugin"] == FLEX:
        attend, parameters = _flex_attend(spec, device)
    else:
        attend, parameters = _plugin_attend(spec, device)

    def case(length: int):
        q, k, v, grad = _inputs(spec, length, device)
        tensors = [q, k, v, *parameters]

        def run():
            out = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            out.backward(grad.transpose(1, 2))
            for t in tensors:
                t.grad = None

        return run

    return case, device
