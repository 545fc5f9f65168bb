"""The Triton kernel's comparison against the dense reference, shared by the interpreter
test (a child process on the CPU) and the CUDA test. Imports nothing from triton itself:
the interpreter setting must be in place before the kernel module is imported."""

from __future__ import annotations

import torch

CASES = [
    {"name": "exact-g4", "shape": [1, 8, 2, 37, 16], "distances": [0, 1, 2, 3, 5, 8, 13, 21]},
    {"name": "exact-g1-T1", "shape": [2, 2, 2, 1, 16], "distances": [0, 1, 2, 3]},
    {"name": "exact-g2-d24", "shape": [1, 4, 2, 50, 24], "distances": [0, 1, 2, 4, 7, 40, 99]},
    {
        "name": "rungs-g4",
        "shape": [1, 4, 1, 45, 16],
        "distances": [0, 1, 2, 3],
        "lo": [4, 7, 12, 20, 33, 60],
        "frac": [0.0, 0.3, 0.5, 0.9, 0.2, 0.4],
        "valid": [True, True, False, True, True, True],
    },
    {
        "name": "rungs-lo0-g2",
        "shape": [2, 4, 2, 19, 32],
        "distances": [0, 1],
        "lo": [0, 2, 5],
        "frac": [0.25, 0.5, 0.75],
        "valid": [True, True, True],
    },
    {  # the model's layout: (B, T, heads, D) tensors viewed as (B, heads, T, D), so q, k,
        # v and the output's gradient are read through strides
        "name": "rungs-model-layout",
        "shape": [2, 4, 2, 33, 16],
        "distances": [0, 1, 2],
        "lo": [3, 6, 10],
        "frac": [0.6, 0.1, 0.5],
        "valid": [True, True, True],
        "model_layout": True,
    },
    {  # many queries read one key (tests/kernels/test_one_key.py): every distance below the
        # length and rungs whose first row reads row 0, every query leaning toward key 0
        "name": "one-key",
        "shape": [1, 4, 2, 24, 16],
        "distances": list(range(24)),
        "lo": [0, 1, 6],
        "frac": [0.3, 0.7, 0.45],
        "valid": [True, True, True],
        "sink": True,
    },
]


def case_slots(case: dict, device):
    from lit_sparse.kernels.slots import KeySlots

    distances = torch.tensor(case["distances"], device=device)
    if not case.get("lo"):
        return KeySlots(distances=distances, reach=int(distances.max()) + 1)
    return KeySlots(
        distances=distances,
        reach=max(case["distances"] + [x + 1 for x in case["lo"]]) + 1,
        rung_lo=torch.tensor(case["lo"], device=device),
        rung_frac=torch.tensor(case["frac"], device=device, requires_grad=True),
        rung_valid=torch.tensor(case["valid"], device=device),
    )


def _draw(gen, batch, heads, length, dim):
    return torch.randn(batch, heads, length, dim, generator=gen)


def _draw_model_layout(gen, batch, heads, length, dim):
    return torch.randn(batch, length, heads, dim, generator=gen).transpose(1, 2)


def compare(cases: list[dict], device="cpu", dtype=torch.float32) -> list[dict]:
    """Per case and output (out, dq, dk, dv, dfrac): max |triton - reference| / (1 + max
    |reference|); the reference runs in float64 on the same (rounded) inputs."""
    from lit_sparse.kernels.reference import slots_attention
    from lit_sparse.kernels.triton_kernel import triton_attention

    errors = []
    for case in cases:
        gen = torch.Generator().manual_seed(case["seed"])
        b, h, kv, t, d = case["shape"]
        layout = _draw_model_layout if case.get("model_layout") else _draw
        inputs = [layout(gen, b, n, t, d) for n in (h, kv, kv)]
        if case.get("sink"):  # each query's score for key 0 about 4 above the others
            lean = torch.randn(d, generator=gen)
            lean *= 2 * d**0.25 / lean.norm()
            inputs[0] += lean
            inputs[1][:, :, 0] += lean
        inputs = [x.to(device, dtype) for x in inputs]
        weight = layout(gen, b, h, t, d).to(device)
        slots = case_slots(case, device)
        got = []
        for path, precision in ((triton_attention, dtype), (slots_attention, torch.float64)):
            q, k, v = (x.detach().to(precision).requires_grad_() for x in inputs)
            assert q.is_contiguous() != bool(case.get("model_layout"))
            leaves = [q, k, v] + ([slots.rung_frac] if slots.n_rungs else [])
            kwargs = {"block": case["block"]} if path is triton_attention else {}
            out = path(q, k, v, slots, **kwargs)
            # the output's gradient is ``weight``, in its layout
            grads = torch.autograd.grad(out, leaves, weight.to(out.dtype))
            got.append([out.detach()] + list(grads))
        for name, x, y in zip(["out", "dq", "dk", "dv", "dfrac"], *got, strict=False):
            err = ((x.double() - y.double()).abs().max() / (1 + y.double().abs().max())).item()
            errors.append({"case": case["name"], "what": name, "err": err})
    return errors
