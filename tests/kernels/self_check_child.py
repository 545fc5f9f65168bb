"""The Triton kernel's self-check under ``TRITON_INTERPRET=1``, run as a child process by
``test_self_check.py`` (the interpreter must be on before triton is imported). Prints one
JSON line: what each scenario saw.

CPU tensors are sent down the CUDA dispatch (``kernels._cpu_attention``), so a learned
Fibonacci layer's forward reaches the Triton kernel and its self-check on (cpu, float32).
The check runs a smaller problem than on a GPU (the interpreter is slow), of the same kinds:
a sink on key 0, rungs (one at lo = 0, one invalid), GQA, and 24 positions in blocks of 16.
"""

from __future__ import annotations

import json
import os
import warnings

import torch

from lit_sparse import build_attention, kernels
from lit_sparse.errors import KernelCheckError
from lit_sparse.kernels import gather_attention, self_check, triton_kernel

LENGTH = 24
self_check.PROBLEM = self_check.Problem(
    length=LENGTH,
    distances=(0, 1, 2, 3, 5, 8, 13, 40),
    rung_lo=(0, 4, 9),
    rung_frac=(0.3, 0.6, 0.8),
    rung_valid=(True, False, True),
    batch=1,
)
triton_kernel._blocks = lambda groups, length: 16  # two blocks of 24 positions, the last partial
kernels._cpu_attention = kernels._triton_or_gather  # CPU tensors take the CUDA dispatch


class Launches:
    """A kernel's launches counted, and ``after(args)`` run after each (the injected fault)."""

    def __init__(self, jit):
        self.jit, self.count, self.after = jit, 0, None

    def __getitem__(self, grid):
        launch = self.jit[grid]

        def run(*args, **kwargs):
            self.count += 1
            launch(*args, **kwargs)
            if self.after is not None:
                self.after(args)

        return run


def double_key_zero(args):
    """The wrong kernel: key 0, which the most queries read, gets twice its dK."""
    dk = args[6]
    dk[:, :, 0] *= 2


forward = triton_kernel._forward_kernel = Launches(triton_kernel._forward_kernel)
dkv = triton_kernel._dkv_kernel = Launches(triton_kernel._dkv_kernel)
checks = []
measure = self_check.measure


def counted_measure(*args, **kwargs):
    checks.append(args[1:])
    return measure(*args, **kwargs)


self_check.measure = counted_measure

pattern = build_attention("fibonacci", window=4, schedule="learned").build(1, 2, LENGTH)
with torch.no_grad():
    pattern.theta.fill_(0.41)  # non-integer rungs: frac's gradient is live
gen = torch.Generator().manual_seed(3)
q = torch.randn(1, LENGTH, 2, 16, generator=gen).transpose(1, 2)  # G = 2, the model's layout
k, v = (torch.randn(1, LENGTH, 1, 16, generator=gen).transpose(1, 2) for _ in "kv")
weight = torch.randn(1, 2, LENGTH, 16, generator=gen)


def model_run(path=None):
    """The layer's output and the gradients of q, k, v and theta (detached), through its
    forward (the dispatch) or through ``path`` on its slots."""
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    if path is None:
        out = pattern(*leaves)
    else:
        out = path(*leaves, pattern.slots(LENGTH, torch.device("cpu")))
    grads = torch.autograd.grad((out * weight).sum(), [*leaves, pattern.theta])
    return [out.detach(), *grads]


def max_error(got, want):
    pairs = zip(got, want, strict=True)
    return max(float((a - b).abs().max() / (1 + b.abs().max())) for a, b in pairs)


results = {}
gather = model_run(gather_attention)

# the real kernel: checked once, trusted, serves the layer
os.environ.pop(self_check.ENV, None)
before = forward.count
real = model_run()
results["real"] = {
    "verdicts": [str(x) for x in self_check.verdicts().values()],
    "checks": len(checks),
    "forward_launches": forward.count - before,  # the check's and the layer's
    "error_vs_gather": max_error(real, gather),
}

# a wrong kernel: the check reports dK, the layer runs on the gather path
self_check.forget()
dkv.after = double_key_zero
before, checks_before = forward.count, len(checks)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    wrong = [model_run(), model_run()]
results["wrong"] = {
    "warnings": [
        str(w.message) for w in caught if issubclass(w.category, self_check.KernelCheckWarning)
    ],
    "checks": len(checks) - checks_before,
    "forward_launches": forward.count - before,  # the check's only
    "equal_to_gather": all(
        torch.equal(a, b) for run in wrong for a, b in zip(run, gather, strict=True)
    ),
}

# strict: the same verdict is an error, no second check
os.environ[self_check.ENV] = "strict"
checks_before = len(checks)
try:
    model_run()
    results["strict"] = {"raised": None}
except KernelCheckError as error:
    results["strict"] = {"raised": str(error), "checks": len(checks) - checks_before}

# 0: no check; the (wrong) kernel serves the layer
self_check.forget()
os.environ[self_check.ENV] = "0"
before, checks_before = forward.count, len(checks)
skipped = model_run()
results["skip"] = {
    "checks": len(checks) - checks_before,
    "forward_launches": forward.count - before,
    "dk_error_vs_gather": max_error([skipped[2]], [gather[2]]),
    "dq_error_vs_gather": max_error([skipped[1]], [gather[1]]),
}

print(json.dumps(results))
