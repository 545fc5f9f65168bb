"""``bench attention``'s rows: one attention call, forward + backward, per plugin.

Every sparse plugin is configured with the same keys per query (its ``bench_cases`` hook
gets them): fibonacci's window W plus its rungs; sliding_window a window of that many keys;
bigbird the window W plus 2 global and (keys - W - 3) random keys per block; natten (when
``natten_mps`` is installed) a kernel of that many keys. Inputs are laid out as the model
hands them to attention: (B, T, heads, D) tensors viewed as (B, heads, T, D); dense and
sparse get the same tensors. :func:`floor_bytes` is the op's unavoidable memory traffic and
:func:`useful_flops` its useful work: 4 D FLOPs per query head and key slot forward (a dot
product and a weighted value row), 3x that forward + backward, with the key slots the
FLOPs counter counts (:func:`lit_sparse.evaluation.flops.pattern_keys`; dense: every
distance up to T, as the counter counts it).

FlexAttention, torch's own way to run a custom mask, is the peer of every slot plugin: row
``flex:<plugin>`` runs ``flex_attention`` under ``torch.compile`` with a ``BlockMask`` of the
plugin's slots (:func:`flex_block_mask`: its 128 x 128 tiles that hold any attended key,
and a ``mask_mod`` over a distance table inside them). On the CPU it is timed forward only
(FlexAttention has no CPU backward in torch 2.13), on CUDA forward and backward; its
compilation happens in the first full-size call, whose extra time is reported apart. A
learned rung interpolates two rows into one key, which a mask cannot: its flex row attends
both rows (the same tiles and work; the outputs equal the plugin's while the rungs sit on
integer distances, as at the start of training).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DTYPES",
    "FLEX",
    "FLEX_PREFIX",
    "flex_peer",
    "is_flex",
    "LEARNED",
    "NATTEN",
    "SDPA",
    "attention_case",
    "bench_plugins",
    "build_plugin",
    "fibonacci_keys",
    "flex_block_mask",
    "floor_bytes",
    "useful_flops",
    "natten_available",
    "op_plugin_names",
    "plugin_names",
    "slot_plugin_names",
]

LEARNED = "fibonacci_learned"
NATTEN = "natten"
FLEX = "flex"
FLEX_PREFIX = "flex:"
SDPA = "sdpa"  # dense attention on SDPA, whatever else is installed (flash-attn: "dense")
FLEX_BLOCK = 128  # FlexAttention's default tile
DTYPES = ("float32", "bfloat16", "float16")


def bench_plugins(window: int, keys: int) -> dict[str, Any]:
    """Row name -> plugin: every registered plugin's ``bench_cases(keys, window)``."""
    from lit_sparse.attention import all_bench_cases

    return all_bench_cases(keys, window)


def plugin_names(window: int = 12) -> list[str]:
    return list(bench_plugins(window, fibonacci_keys(window, 1024)))


def op_plugin_names(window: int = 12) -> list[str]:
    """The rows whose layer is an op of their own: not a stack of other plugins (a hybrid's
    one layer is its local plugin's)."""
    from lit_sparse.attention import HybridAttention

    rows = bench_plugins(window, fibonacci_keys(window, 1024))
    return [name for name, plugin in rows.items() if not isinstance(plugin, HybridAttention)]


def slot_plugin_names(window: int = 12) -> list[str]:
    """The rows whose pattern is described by its slots (a slot pattern with the slots'
    own math): FlexAttention can take their masks."""
    from lit_sparse.attention import SlotPattern

    def by_slots(pattern) -> bool:
        return isinstance(pattern, SlotPattern) and type(pattern).reference is SlotPattern.reference

    rows = bench_plugins(window, fibonacci_keys(window, 1024))
    ops = op_plugin_names(window)
    return [name for name in ops if by_slots(rows[name].build(0, 16, 64))]


def natten_available() -> bool:
    try:
        import natten_mps  # noqa: F401
    except ImportError:
        return False
    return True


def build_plugin(name: str, window: int, keys: int):
    """The plugin of row ``name``, configured to attend ``keys`` keys per query."""
    if name == SDPA:
        from lit_sparse.attention import build_attention

        return build_attention("dense", backend="sdpa")
    plugins = bench_plugins(window, keys)
    if name not in plugins:
        raise ValueError(f"no bench row {name!r}; rows: {', '.join(plugins)}")
    return plugins[name]


def is_flex(name: str) -> bool:
    return name.startswith(FLEX_PREFIX)


def flex_peer(name: str) -> str:
    """The flex row of plugin row ``name``."""
    return FLEX_PREFIX + name


def _relative_table(slots, length: int, device):
    """(T,) bool: the distances the slots read (exact ones, every used rung's lower tap, and
    its upper tap where it has a weight), and the absolute keys' (n_blocks, T) table."""
    import torch

    from lit_sparse.kernels import KeySlots

    if not isinstance(slots, KeySlots):  # a tensor of distances
        slots = KeySlots(distances=slots.to(torch.long), reach=int(slots.max()) + 1)
    allowed = torch.zeros(length, dtype=torch.bool)
    distances = slots.distances.to("cpu", torch.long)
    allowed[distances[distances < length]] = True
    if slots.n_rungs:
        valid = slots.rung_valid.to("cpu")
        lo = slots.rung_lo.to("cpu", torch.long)[valid]
        frac = slots.rung_frac.detach().to("cpu")[valid]
        allowed[lo[lo < length]] = True
        upper = lo[frac != 0] + 1
        allowed[upper[upper < length]] = True
    absolute = None
    if slots.n_absolute:
        n_blocks = -(-length // slots.block_size)
        keys = slots.block_keys[:n_blocks].to("cpu", torch.long)
        absolute = torch.zeros(n_blocks, length, dtype=torch.bool)
        rows = torch.arange(n_blocks)[:, None].expand_as(keys)
        used = (keys >= 0) & (keys < length)
        absolute[rows[used], keys[used]] = True
    return slots, allowed.to(device), None if absolute is None else absolute.to(device)


def flex_block_mask(slots, length: int, device):
    """FlexAttention's block mask for causal attention over ``slots`` (a ``KeySlots``, or a
    tensor of distances) at ``length``, built from the distance table in O((T / 128)^2):
    a tile is kept when a distance it spans (or an absolute key in it) is attended, full
    when every pair in it is; ``mask_mod`` decides inside the partial tiles."""
    import torch
    from torch.nn.attention.flex_attention import BlockMask

    slots, allowed, absolute = _relative_table(slots, length, device)
    n = -(-length // FLEX_BLOCK)
    table = allowed.to("cpu", torch.long)
    sums = torch.zeros(length + 1, dtype=torch.long)
    sums[1:] = torch.cumsum(table, 0)
    offsets = torch.arange(n)  # q block - kv block
    low = (offsets * FLEX_BLOCK - (FLEX_BLOCK - 1)).clamp(0, length)
    high = (offsets * FLEX_BLOCK + FLEX_BLOCK).clamp(0, length)  # exclusive
    hits = sums[high] - sums[low]  # attended distances each diagonal of tiles spans
    full = (offsets > 0) & (hits == high - low) & (high - low == 2 * FLEX_BLOCK - 1)
    q_blocks, kv_blocks = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    diagonal = (q_blocks - kv_blocks).clamp(min=0)
    causal = kv_blocks <= q_blocks
    full_tiles = causal & full[diagonal]
    if length % FLEX_BLOCK:  # tiles of the short last block are never full
        full_tiles[-1, :] = full_tiles[:, -1] = False
    partial = causal & (hits[diagonal] > 0) & ~full_tiles
    if absolute is not None:  # the tiles of the keys each block of queries drew
        block_size = slots.block_size
        blocks, keys = absolute.to("cpu").nonzero(as_tuple=True)  # the drawn (block, key) pairs
        first = blocks * block_size // FLEX_BLOCK
        last = ((blocks + 1) * block_size).clamp(max=length).sub(1) // FLEX_BLOCK
        for shift in range(-(-block_size // FLEX_BLOCK) + 1):
            rows = first + shift
            inside = rows <= last
            partial[rows[inside], keys[inside] // FLEX_BLOCK] = True
        partial &= causal & ~full_tiles

    def indices(kept):
        counts = kept.sum(dim=1).to(torch.int32)
        order = torch.argsort((~kept).to(torch.int8), dim=1, stable=True).to(torch.int32)
        return counts[None, None].to(device), order[None, None].to(device)

    block_size, min_abs = slots.block_size, slots.min_abs_distance
    last = length - 1

    def mask_mod(batch, head, q_index, kv_index):
        distance = q_index - kv_index
        keep = (distance >= 0) & allowed[distance.clamp(0, last)]
        if absolute is not None:
            drawn = absolute[q_index // block_size, kv_index.clamp(0, last)]
            keep = keep | (drawn & (distance >= min_abs))
        return keep

    counts, order = indices(partial)
    full_counts, full_order = indices(full_tiles)
    return BlockMask.from_kv_blocks(
        counts,
        order,
        full_counts,
        full_order,
        BLOCK_SIZE=FLEX_BLOCK,
        mask_mod=mask_mod,
        seq_lengths=(length, length),
    )


def block_density(mask) -> float:
    """The fraction of the causal (lower-triangle) tiles the mask computes, partial or full:
    1 for dense causal attention."""
    n = mask.kv_num_blocks.shape[-1]
    kept = int(mask.kv_num_blocks.sum())
    if mask.full_kv_num_blocks is not None:
        kept += int(mask.full_kv_num_blocks.sum())
    return kept / (n * (n + 1) // 2)


def floor_bytes(spec: dict[str, Any]) -> int:
    """Bytes one forward + backward of attention must move at least (see module doc)."""
    import torch

    itemsize = getattr(torch, spec["dtype"]).itemsize
    heads, kv_heads = spec["heads"], spec["kv_heads"]
    per_row = 6 * (heads + kv_heads) * spec["dim"]  # fwd q k v o, bwd q k v o do dq dk dv
    return itemsize * spec["batch"] * spec["length"] * per_row


def useful_flops(spec: dict[str, Any], keys: float, backward: bool = True) -> float:
    """The op's useful FLOPs at ``spec``'s shape with ``keys`` key slots per query."""
    forward = 4 * spec["dim"] * keys * spec["heads"] * spec["length"] * spec["batch"]
    return forward * (3 if backward else 1)


def fibonacci_keys(window: int, length: int) -> int:
    """Keys per query of fixed-alpha Fibonacci attention with ``window`` at ``length``."""
    from lit_sparse.attention import fibonacci_rungs, layer_distances

    return len(layer_distances(1.0, fibonacci_rungs(15), window, length))


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
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return natten_mps.na1d(q, k, v, kernel_size=spec["keys"], is_causal=True).transpose(1, 2)

    return attend, []


_FLEX = None  # one compiled flex_attention per process: its rows share dynamo's cache


def _compiled_flex():
    global _FLEX
    if _FLEX is None:
        import torch
        from torch.nn.attention.flex_attention import flex_attention

        for name in ("recompile_limit", "cache_size_limit"):  # a compile per length and mask
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, max(64, getattr(torch._dynamo.config, name)))
        _FLEX = torch.compile(flex_attention, dynamic=False)
    return _FLEX


def _flex_attend(spec: dict[str, Any], device, info: dict[str, Any]):
    """FlexAttention with the block mask of the row's plugin (``flex:<plugin>``), compiled
    once per length; below one tile (the warm-up) it runs eagerly, which needs no compile."""
    import warnings

    from torch.nn.attention.flex_attention import flex_attention

    pattern = _pattern(spec)
    masks = {}

    def attend(q, k, v):
        length = q.shape[2]
        if length not in masks:
            masks[length] = flex_block_mask(pattern.slots(length, "cpu"), length, device)
            if length == spec["length"]:
                info["block_density"] = block_density(masks[length])
        if length < FLEX_BLOCK:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # eager flex warns that it is unfused
                return flex_attention(q, k, v, block_mask=masks[length], enable_gqa=True)
        return _compiled_flex()(q, k, v, block_mask=masks[length], enable_gqa=True)

    return attend, []


def _pattern(spec: dict[str, Any]):
    """The pattern of the row's plugin (a flex row's: its peer's): layer 0 of 16, built for
    the benched length."""
    name = spec["plugin"].removeprefix(FLEX_PREFIX)
    return build_plugin(name, spec["window"], spec["keys"]).build(0, 16, spec["length"])


def _plugin_attend(spec: dict[str, Any], device):
    """The row's plugin's pattern, and its parameters."""
    pattern = _pattern(spec).to(device)
    return pattern, list(pattern.parameters())


def _counted_keys(spec: dict[str, Any]) -> int:
    """Key slots per query at the benched length, as the FLOPs counter counts them (natten:
    its kernel's keys)."""
    from lit_sparse.evaluation import pattern_keys

    if spec["plugin"] == NATTEN:
        return spec["keys"]
    return pattern_keys(_pattern(spec), spec["length"])


def attention_case(spec: dict[str, Any]):
    """(case, device): case(length) gives run() = one forward + backward at ``length``."""
    import torch

    from lit_sparse.runs import keep_freed_memory

    keep_freed_memory()  # as fit does: a row's scratch is not faulted in again at every call
    device = torch.device(spec["device"])
    info: dict[str, Any] = {"pass": "fwd+bwd"}
    if spec["plugin"] == NATTEN:
        attend, parameters = _natten_attend(spec)
    elif is_flex(spec["plugin"]):
        attend, parameters = _flex_attend(spec, device, info)
        if device.type == "cpu":
            info["pass"] = "fwd"  # FlexAttention has no CPU backward (torch 2.13)
    else:
        attend, parameters = _plugin_attend(spec, device)
    backward = info["pass"] == "fwd+bwd"
    info["keys"] = _counted_keys(spec)

    def case(length: int):
        q, k, v, grad = _inputs(spec, length, device)
        tensors = [q, k, v, *parameters]
        if not backward:  # forward only: inputs that need no gradient (flex checks them)
            q, k, v = q.detach(), k.detach(), v.detach()

        def run():
            with torch.set_grad_enabled(backward):
                out = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            if backward:
                out.backward(grad.transpose(1, 2))
                for t in tensors:
                    t.grad = None

        return run

    case.info = info  # what the row reports besides its time (pass, block density)
    return case, device
