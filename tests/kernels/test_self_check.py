"""The Triton kernel's first-use self-check (``kernels/self_check.py``).

In this process the check's logic runs against stand-in kernels built from the gather path
(right, or wrong in one way each); under ``TRITON_INTERPRET=1`` a child process
(``self_check_child.py``) runs it with the real Triton kernel and with one whose dK launch
is made wrong, through a learned Fibonacci layer's forward: one process for every scenario
(about 10 s of CPU, most of it the interpreter running two checks and two runs of the
layer; the whole file about 23 s), its tests marked slow as it starts a process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import torch

from lit_sparse import build_attention, kernels
from lit_sparse.errors import ConfigError, KernelCheckError
from lit_sparse.kernels import gather_attention, self_check

HERE = Path(__file__).parent
ENV = self_check.ENV
CPU32 = (torch.device("cpu"), torch.float32)


class _DoubleKeyZero(torch.autograd.Function):
    """Identity forward; the backward doubles key 0's gradient (the row most queries read)."""

    @staticmethod
    def forward(ctx, k):
        return k.clone()

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        grad[:, :, 0] *= 2
        return grad


def stand_in(attention):
    """A kernel module: ``attention`` as its op, every shape supported."""
    return types.SimpleNamespace(triton_attention=attention, supported=lambda q, k, slots: True)


RIGHT = stand_in(gather_attention)
WRONG_DK = stand_in(lambda q, k, v, slots: gather_attention(q, _DoubleKeyZero.apply(k), v, slots))


def _raises(q, k, v, slots):
    raise RuntimeError("an illegal memory access was encountered\nCUDA kernel errors ...")


def _nan_dv(q, k, v, slots):
    v = v.clone()
    v.register_hook(lambda g: g.index_fill(2, torch.tensor([5]), float("nan")))
    return gather_attention(q, k, v, slots)


@pytest.fixture
def fresh(monkeypatch):
    """No verdicts, the variable unset, and the checks counted."""
    monkeypatch.delenv(ENV, raising=False)
    self_check.forget()
    checks = []
    measure = self_check.measure

    def counted(*args, **kwargs):
        checks.append(args[1:])
        return measure(*args, **kwargs)

    monkeypatch.setattr(self_check, "measure", counted)
    yield checks
    self_check.forget()


def qk(dtype=torch.float32, heads=4, kv_heads=2, dim=16):
    return torch.randn(1, heads, 8, dim, dtype=dtype), torch.randn(1, kv_heads, 8, dim, dtype=dtype)


def test_a_kernel_that_agrees_is_trusted_after_one_check(fresh, recwarn):
    q, k = qk()
    assert all(self_check.trusted(RIGHT, q, k) for _ in range(3))
    assert fresh == [(torch.device("cpu"), torch.float32, 2, 16)]  # the caller's G and D
    assert self_check.verdicts() == {CPU32: None}
    assert not [w for w in recwarn if w.category is self_check.KernelCheckWarning]


def test_the_verdict_is_cached_per_device_and_dtype(fresh):
    q, k = qk()
    self_check.trusted(RIGHT, q, k)
    self_check.trusted(RIGHT, *qk(torch.float64))
    self_check.trusted(RIGHT, q, k)
    assert [c[1] for c in fresh] == [torch.float32, torch.float64]
    started = time.perf_counter()
    for _ in range(1000):
        self_check.trusted(RIGHT, q, k)
    assert time.perf_counter() - started < 0.1  # a dict lookup after the first use


def test_a_wrong_dk_warns_once_in_one_line(fresh):
    q, k = qk()
    with pytest.warns(self_check.KernelCheckWarning) as caught:
        assert not self_check.trusted(WRONG_DK, q, k)
    (message,) = [str(w.message) for w in caught]
    assert "\n" not in message
    assert message.startswith(
        "lit_sparse: the Triton attention kernel disagrees with the reference on cpu float32 "
        "(dK max error "
    )
    assert message.endswith(" > 1e-4); using the gather path")
    error = float(message.split("dK max error ")[1].split()[0])
    assert error > 0.1  # key 0, the sink, carries most of dK
    assert "output" not in message and "dQ" not in message and "dV" not in message
    assert not self_check.trusted(WRONG_DK, q, k)  # no second warning (pytest.warns: none left)
    assert len(fresh) == 1


def test_the_layer_then_runs_on_the_gather_path(fresh, monkeypatch):
    """A learned Fibonacci layer's forward through the CUDA dispatch (CPU tensors sent down
    it) with the wrong kernel: after the warning, its output and every gradient equal the
    gather path's exactly."""
    monkeypatch.setattr(kernels, "_triton", lambda: WRONG_DK)
    monkeypatch.setattr(kernels, "_cpu_attention", kernels._triton_or_gather)
    pattern = build_attention("fibonacci", window=4, schedule="learned").build(1, 2, 40)
    with torch.no_grad():
        pattern.theta.fill_(0.41)
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 40, 16, generator=gen)
    k, v = torch.randn(2, 2, 40, 16, generator=gen), torch.randn(2, 2, 40, 16, generator=gen)

    def run(path):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        out = path(*leaves)
        return [out, *torch.autograd.grad(out.square().sum(), [*leaves, pattern.theta])]

    def on_slots(attention):  # the slots (frac's graph) built anew for each run
        return lambda q, k, v: attention(q, k, v, pattern.slots(40, torch.device("cpu")))

    want = run(on_slots(gather_attention))
    wrong = run(on_slots(WRONG_DK.triton_attention))
    assert not torch.equal(wrong[2], want[2])  # the stand-in is wrong where it should be
    with pytest.warns(self_check.KernelCheckWarning):
        first = run(pattern)
    for got in (first, run(pattern)):
        for a, b in zip(got, want, strict=True):
            assert torch.equal(a, b)


def test_strict_makes_a_disagreement_an_error_on_every_call(fresh, monkeypatch, recwarn):
    monkeypatch.setenv(ENV, "strict")
    q, k = qk()
    for _ in range(2):
        with pytest.raises(KernelCheckError, match=r"dK max error .* > 1e-4\); ") as raised:
            self_check.trusted(WRONG_DK, q, k)
        assert "\n" not in str(raised.value)
        assert str(raised.value).endswith(f"{ENV}=strict makes this an error")
    assert len(fresh) == 1
    assert not [w for w in recwarn if w.category is self_check.KernelCheckWarning]
    assert self_check.trusted(RIGHT, *qk(torch.float64))  # a kernel that agrees passes


def test_zero_skips_the_check(fresh, monkeypatch):
    monkeypatch.setenv(ENV, "0")
    assert self_check.trusted(WRONG_DK, *qk())
    assert fresh == []


def test_an_unknown_setting_is_refused(fresh, monkeypatch):
    monkeypatch.setenv(ENV, "yes")
    with pytest.raises(ConfigError, match=r"LIT_SPARSE_KERNEL_CHECK='yes' is not allowed"):
        self_check.trusted(RIGHT, *qk())


@pytest.mark.parametrize(
    ("attention", "said"),
    [
        (_raises, "failed on cpu float32 (RuntimeError: an illegal memory access was encountered)"),
        (_nan_dv, "disagrees with the reference on cpu float32 (dV max error nan > 1e-4)"),
    ],
    ids=["raises", "nan"],
)
def test_a_kernel_that_raises_or_gives_nan_is_not_trusted(fresh, attention, said):
    with pytest.warns(self_check.KernelCheckWarning) as caught:
        assert not self_check.trusted(stand_in(attention), *qk())
    assert f"lit_sparse: the Triton attention kernel {said}; using the gather path" == str(
        caught[0].message
    )


def test_a_first_use_under_inference_mode_still_checks_the_gradients(fresh):
    with torch.inference_mode(), pytest.warns(self_check.KernelCheckWarning, match="dK"):
        assert not self_check.trusted(WRONG_DK, *qk())
    self_check.forget()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert self_check.trusted(RIGHT, *qk())


def test_threads_racing_to_the_first_use_share_one_check(fresh, monkeypatch):
    measure = self_check.measure

    def slow(*args, **kwargs):
        time.sleep(0.2)
        return measure(*args, **kwargs)

    monkeypatch.setattr(self_check, "measure", slow)
    q, k = qk()
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(self_check.trusted(RIGHT, q, k)))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 6 and len(fresh) == 1


@pytest.mark.parametrize("dtype", sorted(self_check.TOLERANCES, key=str), ids=str)
def test_the_tolerances_leave_room_for_rounding(dtype):
    """The gather path run in the checked dtype (float32 inside, results rounded to the
    dtype, as the kernel stores them) stays 5x below the tolerance at a model's shape."""
    errors = self_check.measure(RIGHT, "cpu", dtype, groups=4, head_dim=64)
    assert set(errors) == set(self_check.OUTPUTS)
    assert max(errors.values()) < self_check.TOLERANCES[dtype] / 5, errors


def test_the_problem_has_what_sparse_kernels_get_wrong():
    """Key 0 read by many queries and leaned on by all, learned rungs with a gradient, GQA,
    a length no block divides."""
    problem = self_check.PROBLEM
    slots = problem.slots("cpu", torch.float32)
    readers = set(problem.distances) | {
        i for lo, ok in zip(problem.rung_lo, problem.rung_valid, strict=True) if ok
        for i in (lo, lo + 1)
    }  # fmt: skip
    assert len({i for i in readers if i < problem.length}) >= 20
    assert slots.n_rungs and slots.rung_frac.requires_grad and 0 in problem.rung_lo
    assert not all(problem.rung_valid)
    assert problem.kv_heads >= 2 and all(problem.length % b for b in (16, 32, 64, 128))
    q, k, _, _ = problem.inputs(torch.float32, groups=2, head_dim=16)
    scores = torch.einsum("bhtd,bhsd->bhts", q, k.repeat_interleave(2, 1)) / 4
    assert (scores[..., 0] - scores[..., 1:].mean(-1)).mean() > 3  # the sink


@pytest.fixture(scope="module")
def interpreted():
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (extra 'triton')")
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.getcwd()}
    env.pop(ENV, None)
    result = subprocess.run(
        [sys.executable, str(HERE / "self_check_child.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_real_kernel_passes_its_check_and_serves_the_layer(interpreted):
    real = interpreted["real"]
    assert real["verdicts"] == ["None"] and real["checks"] == 1
    assert real["forward_launches"] == 2  # the check's and the layer's
    assert real["error_vs_gather"] < 2e-5


@pytest.mark.slow
def test_a_wrong_triton_dk_is_reported_and_the_layer_runs_on_gather(interpreted):
    wrong = interpreted["wrong"]
    (message,) = wrong["warnings"]
    assert message.startswith(
        "lit_sparse: the Triton attention kernel disagrees with the reference on cpu float32 "
        "(dK max error "
    )
    assert message.endswith("> 1e-4); using the gather path") and "dQ" not in message
    assert wrong["checks"] == 1 and wrong["forward_launches"] == 1  # the check's only
    assert wrong["equal_to_gather"]


@pytest.mark.slow
def test_strict_raises_and_zero_skips_under_the_interpreter(interpreted):
    strict, skip = interpreted["strict"], interpreted["skip"]
    assert strict["raised"] and "dK max error" in strict["raised"] and strict["checks"] == 0
    assert skip["checks"] == 0 and skip["forward_launches"] == 1
    assert skip["dk_error_vs_gather"] > 0.1 and skip["dq_error_vs_gather"] < 2e-5
