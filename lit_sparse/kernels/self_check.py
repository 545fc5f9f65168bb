"""The Triton kernel checks itself once per (device, dtype) per process before it is trusted: on
:data:`PROBLEM` (what sparse kernels get wrong) against the gather path in float64; an error
above :data:`TOLERANCES`, or a raise, sends that (device, dtype) to the gather path with one
warning. One launch cannot catch a rare race."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import Tensor

from lit_sparse.errors import ConfigError, KernelCheckError
from lit_sparse.kernels.gather import gather_attention
from lit_sparse.kernels.slots import KeySlots

ENV = "LIT_SPARSE_KERNEL_CHECK"
"""The environment variable: ``0`` skips the check, ``strict`` makes a failure an error."""

TOLERANCES = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
"""Largest allowed max |kernel - reference| / (1 + max |reference|) per input dtype, far above
rounding (docs/performance.md); NaN always fails."""


@dataclass(frozen=True)
class Problem:
    """The check's slots, batch and length (the heads and head dim are the caller's)."""

    length: int = 100
    """No multiple of any block the kernel picks (16 to 128 positions): a partial last block."""
    distances: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7, 8, 13, 21, 34, 55, 89, 144)
    """A band (key 0 read by each of queries 0-8), longer ones, one past the length."""
    rung_lo: tuple[int, ...] = (0, 3, 9, 30, 60, 70)
    rung_frac: tuple[float, ...] = (0.3, 0.5, 0.75, 0.2, 0.6, 0.9)
    rung_valid: tuple[bool, ...] = (True, True, True, False, True, True)
    batch: int = 2
    kv_heads: int = 2
    sink_score: float = 4.0
    """How much higher every query's score for key 0 is than its typical score."""

    def slots(self, device, frac_dtype: torch.dtype) -> KeySlots:
        """The slots, ``rung_frac`` a leaf that wants its gradient."""
        frac = torch.tensor(self.rung_frac, device=device, dtype=frac_dtype)
        return KeySlots(
            distances=torch.tensor(self.distances, device=device),
            reach=max(*self.distances, *(lo + 1 for lo in self.rung_lo)) + 1,
            rung_lo=torch.tensor(self.rung_lo, device=device),
            rung_frac=frac.requires_grad_(),
            rung_valid=torch.tensor(self.rung_valid, device=device),
        )

    def inputs(self, dtype: torch.dtype, groups: int, head_dim: int) -> list[Tensor]:
        """q, k, v and the output's gradient on the CPU in ``dtype``, (B, T, heads, D) memory
        viewed as (B, heads, T, D) like the model's; every query leans toward key 0."""
        gen = torch.Generator().manual_seed(0)

        def draw(heads):
            return torch.randn(self.batch, self.length, heads, head_dim, generator=gen)

        heads = self.kv_heads * groups
        q, k, v, d_out = draw(heads), draw(self.kv_heads), draw(self.kv_heads), draw(heads)
        lean = torch.randn(head_dim, generator=gen)
        lean *= (self.sink_score**0.5 * head_dim**0.25) / lean.norm()
        q += lean  # (q + lean) . (k_0 + lean) * D^-0.5: sink_score more than q . k_0 * D^-0.5
        k[:, 0] += lean
        return [x.transpose(1, 2).to(dtype) for x in (q, k, v, d_out)]


PROBLEM = Problem()
"""The problem every check runs (tests under the interpreter swap in a smaller one)."""
OUTPUTS = ("output", "dQ", "dK", "dV", "dfrac")


class KernelCheckWarning(UserWarning):
    """The kernel disagreed with the reference; the gather path serves its (device, dtype)."""


_verdicts: dict[tuple[torch.device, torch.dtype], str | None] = {}
"""Per (device, dtype) checked: None (trusted, or the check skipped) or what disagreed."""
_lock = threading.Lock()
_UNCHECKED = object()


def mode() -> str:
    """``check``, ``skip`` or ``strict``, from :data:`ENV` (a ConfigError for another value)."""
    value = os.environ.get(ENV, "").strip().lower()
    modes = {"": "check", "1": "check", "0": "skip", "strict": "strict"}
    if value not in modes:
        allowed = "1 (check; the default), 0 (skip) or strict"
        raise ConfigError(f"{ENV}={value!r} is not allowed: use {allowed}")
    return modes[value]


def trusted(kernel: ModuleType, q: Tensor, k: Tensor) -> bool:
    """Whether ``kernel`` may serve q's (device, dtype), checked on the first call at q's group
    size and head dim: a disagreement warns once, or under ``strict`` raises KernelCheckError."""
    found = _verdicts.get((q.device, q.dtype), _UNCHECKED)
    if found is _UNCHECKED:
        first_use = _first_use
        if "torch._dynamo" in sys.modules:  # a torch.compile may be tracing: run it eagerly
            first_use = torch.compiler.disable(_first_use)  # (imports dynamo: not at import)
        found, checked = first_use(kernel, q.device, q.dtype, q.shape[1] // k.shape[1], q.shape[-1])
        if checked and found is not None and mode() != "strict":
            # the caller of sparse_attention: trusted <- _triton_or_gather <- sparse_attention
            warnings.warn(f"{found}; using the gather path", KernelCheckWarning, stacklevel=4)
    if found is None:
        return True
    if mode() == "strict":
        raise KernelCheckError(f"{found}; {ENV}=strict makes this an error")
    return False


def forget() -> None:
    """Drop every verdict (tests; the next use checks again)."""
    with _lock:
        _verdicts.clear()


def verdicts() -> dict[tuple[torch.device, torch.dtype], str | None]:
    """The verdicts so far: per (device, dtype), None (trusted) or what disagreed."""
    with _lock:
        return dict(_verdicts)


def _first_use(kernel, device: torch.device, dtype: torch.dtype, groups: int, head_dim: int):
    """The verdict, and whether this call made it (under the lock: other threads wait)."""
    with _lock:
        key = (device, dtype)
        if key in _verdicts:
            return _verdicts[key], False
        skip = mode() == "skip"
        found = None if skip else disagreement(kernel, device, dtype, groups, head_dim)
        _verdicts[key] = found
        return found, True


def disagreement(
    kernel: ModuleType, device, dtype: torch.dtype, groups: int = 2, head_dim: int = 16
) -> str | None:
    """None when the kernel agrees with the reference; else one line saying what disagreed and
    by how much, or what the kernel raised."""
    device = torch.device(device)
    where = f"{_device_name(device)} {str(dtype).removeprefix('torch.')}"
    try:
        errors = measure(kernel, device, dtype, groups, head_dim)
    except _KernelFailed as failed:
        error = failed.__cause__
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return (
            f"lit_sparse: the Triton attention kernel failed on {where} "
            f"({type(error).__name__}{': ' + first[:200] if first else ''})"
        )
    limit = TOLERANCES.get(dtype, TOLERANCES[torch.bfloat16])
    bad = [
        f"{name} max error {_short(err)} > {_short(limit, 0)}"
        for name, err in errors.items()
        if not err <= limit  # NaN fails
    ]
    if not bad:
        return None
    return (
        f"lit_sparse: the Triton attention kernel disagrees with the reference on {where} "
        f"({', '.join(bad)})"
    )


class _KernelFailed(Exception):
    """The kernel raised during the check (the cause is the kernel's error)."""


def measure(
    kernel: ModuleType, device, dtype: torch.dtype, groups: int = 2, head_dim: int = 16
) -> dict[str, float]:
    """Per output (:data:`OUTPUTS`): max |kernel - reference| / (1 + max |reference|), the
    reference the gather path in float64 (float32 without it) from the same inputs."""
    device = torch.device(device)
    groups = max(2, groups)  # GQA: fewer KV heads than query heads
    problem = PROBLEM
    wide = torch.float32 if device.type == "mps" else torch.float64
    with _quiet_context(device):
        inputs = problem.inputs(dtype, groups, head_dim)
        try:
            got = _run(kernel.triton_attention, problem, inputs, device, dtype, torch.float32)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except Exception as error:
            raise _KernelFailed() from error
        want = _run(gather_attention, problem, inputs, device, wide, wide)
    return {
        name: ((x.to(wide) - y).abs().max() / (1 + y.abs().max())).item()
        for name, x, y in zip(OUTPUTS, got, want, strict=True)
    }


def _run(path, problem: Problem, inputs, device, dtype, frac_dtype) -> list[Tensor]:
    """The output and the gradients of q, k, v and frac through ``path``."""
    q, k, v, d_out = (x.detach().to(device=device, dtype=dtype) for x in inputs)  # strides kept
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    slots = problem.slots(device, frac_dtype)
    out = path(q, k, v, slots)
    grads = torch.autograd.grad(out, [q, k, v, slots.rung_frac], d_out)
    return [out.detach(), *grads]


@contextlib.contextmanager
def _quiet_context(device: torch.device):
    """Gradients on, inference mode and autocast off, the device current: the same check
    wherever the first use happens."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.inference_mode(False))
        stack.enter_context(torch.enable_grad())
        stack.enter_context(torch.autocast(device.type, enabled=False))
        if device.type == "cuda":
            stack.enter_context(torch.cuda.device(device))
        yield


def _device_name(device: torch.device) -> str:
    if device.type == "cuda" and device.index is None:
        return f"cuda:{torch.cuda.current_device()}"
    return str(device)


def _short(x: float, digits: int = 1) -> str:
    """1.5e-01 -> 1.5e-1."""
    text = f"{x:.{digits}e}"
    return text.replace("e-0", "e-").replace("e+0", "e+").replace("e+", "e")
