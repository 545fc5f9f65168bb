"""The Triton kernel equals the dense reference under ``TRITON_INTERPRET=1`` (on the CPU).

The interpreter must be switched on before triton is imported, so the checks run in a
child process with the variable set there only: nothing leaks into the other tests. The
interpreter is float32-only here (it gets bfloat16 wrong) and more lenient than a GPU; the
kernel uses no ``tl.dot`` and only power-of-two blocks, so the GPU limits it ignores do
not apply.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="triton is not installed (extra 'triton')"
)

CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    from lit_sparse.attention.kernels.slots import KeySlots
    from lit_sparse.attention.kernels.reference import slots_attention
    from lit_sparse.attention.kernels.triton_kernel import triton_attention

    def slots_of(case):
        distances = torch.tensor(case["distances"])
        if not case.get("lo"):
            return KeySlots(distances=distances, reach=int(distances.max()) + 1)
        return KeySlots(
            distances=distances,
            reach=max(case["distances"] + [x + 1 for x in case["lo"]]) + 1,
            rung_lo=torch.tensor(case["lo"]),
            rung_frac=torch.tensor(case["frac"], requires_grad=True),
            rung_valid=torch.tensor(case["valid"]),
        )

    errors = []
    for case in json.loads(sys.argv[1]):
        gen = torch.Generator().manual_seed(case["seed"])
        b, h, kv, t, d = case["shape"]
        q = torch.randn(b, h, t, d, generator=gen, requires_grad=True)
        k = torch.randn(b, kv, t, d, generator=gen, requires_grad=True)
        v = torch.randn(b, kv, t, d, generator=gen, requires_grad=True)
        w = torch.randn(b, h, t, d, generator=gen)
        slots = slots_of(case)
        leaves = [q, k, v] + ([slots.rung_frac] if slots.n_rungs else [])
        got = []
        for path in (triton_attention, slots_attention):
            kwargs = {"block": case["block"]} if path is triton_attention else {}
            out = path(q, k, v, slots, **kwargs)
            got.append([out] + list(torch.autograd.grad((out * w).sum(), leaves)))
        for name, x, y in zip(["out", "dq", "dk", "dv", "dfrac"], *got):
            err = float(((x - y).abs().max() / (1 + y.abs().max())).detach())
            errors.append({"case": case["name"], "what": name, "err": err})
    print(json.dumps(errors))
    """
)

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
]


@pytest.mark.parametrize("block", [16, 32])
def test_triton_kernel_matches_reference_in_the_interpreter(block):
    cases = [dict(case, seed=i, block=block) for i, case in enumerate(CASES)]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    errors = json.loads(result.stdout.strip().splitlines()[-1])
    assert errors, "no comparison ran"
    bad = [e for e in errors if not e["err"] < 2e-5]
    assert not bad, bad


def test_the_interpreter_setting_does_not_leak():
    assert os.environ.get("TRITON_INTERPRET") in (None, "", "0")


def test_dispatch_rules():
    """Relative slots with power-of-two groups go to Triton on CUDA; absolute keys do not."""
    import torch

    from lit_sparse.attention import kernels
    from lit_sparse.attention.kernels import KeySlots, exact_slots

    module = kernels._triton()
    assert module is not None
    q, k = torch.empty(1, 8, 4, 64), torch.empty(1, 2, 4, 64)
    assert module.supported(q, k, exact_slots([0, 1]))
    assert not module.supported(torch.empty(1, 6, 4, 64), k, exact_slots([0, 1]))  # G = 3
    absolute = KeySlots(
        distances=torch.tensor([0]), reach=1, block_keys=torch.zeros(1, 1, dtype=torch.long)
    )
    assert not module.supported(q, k, absolute)
