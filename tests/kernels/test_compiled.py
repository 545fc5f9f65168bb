"""The compiled CPU kernel: equal to the dense reference for every kind of slot, in float64 to
1e-10; deterministic whatever the threads do; its thread count from affinity and quota; the
sparse-BLAS kernel when it cannot be built."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

from lit_sparse import build_attention
from lit_sparse.attention.base import SlotPattern
from lit_sparse.attention.fibonacci_patterns import LearnedFibonacciPattern
from lit_sparse.kernels import build, compiled, sparse_attention
from lit_sparse.kernels.reference import slots_attention
from tests.attention.cases import plugin_cases
from tests.kernels.stand_in import STAND_IN

pytestmark = pytest.mark.skipif(
    not compiled.available(), reason="the compiled CPU kernel cannot be built here"
)

CASES = sorted(name for name in plugin_cases(6) if name != "dense")


def patterns(case: str, window: int = 6, training_length: int = 48):
    plugin = plugin_cases(window)[case]
    for layer in range(2):
        pattern = plugin.build(layer, 2, training_length).double()
        if not isinstance(pattern, SlotPattern):  # a hybrid's dense layer: no slots
            continue
        if isinstance(pattern, LearnedFibonacciPattern):
            with torch.no_grad():
                pattern.theta.fill_(0.41 - 0.9 * layer)  # non-integer alpha * f
        yield pattern


def inputs(length, heads=4, kv_heads=2, dim=16, seed=0, dtype=torch.float64, position_major=False):
    gen = torch.Generator().manual_seed(seed)

    def make(h):
        if position_major:  # the model's layout: (B, T, h, D) viewed as (B, h, T, D)
            return torch.randn(2, length, h, dim, generator=gen, dtype=dtype).transpose(1, 2)
        return torch.randn(2, h, length, dim, generator=gen, dtype=dtype)

    return [make(heads).requires_grad_(), make(kv_heads).requires_grad_(), make(kv_heads)]


def run(path, q, k, v, pattern):
    v = v.detach().requires_grad_()
    out = path(q, k, v, pattern.slots(q.shape[2], q.device))
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(9), dtype=out.dtype)
    wrt = [q, k, v, *pattern.parameters()]
    grads = torch.autograd.grad((out * weights).sum(), wrt, allow_unused=True)
    return [
        out,
        *(torch.zeros_like(x) if g is None else g for x, g in zip(wrt, grads, strict=True)),
    ]


@pytest.mark.parametrize("length", [1, 5, 16, 17, 47, 130])
@pytest.mark.parametrize("case", CASES)
def test_equals_the_reference_in_float64(case, length):
    """Outputs and the gradients of q, k, v and theta, at lengths shorter than the reach,
    across work items (16 positions each) and with a short last item."""
    for pattern in patterns(case):
        q, k, v = inputs(length)
        ours = run(compiled.compiled_attention, q, k, v, pattern)
        reference = run(slots_attention, q, k, v, pattern)
        for a, b in zip(ours, reference, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (4, 1)])
@pytest.mark.parametrize("position_major", [False, True])
def test_grouped_heads_and_layouts(heads, kv_heads, position_major):
    for pattern in patterns("fibonacci-learned-fibonacci"):
        q, k, v = inputs(70, heads, kv_heads, position_major=position_major)
        ours = run(compiled.compiled_attention, q, k, v, pattern)
        reference = run(slots_attention, q, k, v, pattern)
        for a, b in zip(ours, reference, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", ["bigbird", "fibonacci-learned-fibonacci"])
def test_inputs_are_read_with_their_strides_and_outputs_come_in_their_layout(case):
    """q, k, v as slices of one fused projection (the model's qkv: not dense) and an output
    gradient with zero strides go in as they are; the results come back position-major (the
    layout the model's next transpose views), and all equal the reference."""
    gen = torch.Generator().manual_seed(3)
    for pattern in patterns(case):
        fused = torch.randn(2, 70, 4 + 2 + 2, 16, generator=gen, dtype=torch.float64)
        q, k, v = (x.transpose(1, 2) for x in fused.split([4, 2, 2], dim=2))
        assert not v.is_contiguous() and not v.transpose(1, 2).is_contiguous()
        results = []
        for path in (compiled.compiled_attention, slots_attention):
            wrt = [x.detach().requires_grad_() for x in (q, k, v)]
            out = path(*wrt, pattern.slots(70, q.device))
            grad = torch.ones(2, 1, 70, 1, dtype=out.dtype).expand(out.shape)  # zero strides
            results.append([out, *torch.autograd.grad(out, wrt, grad)])
        ours, reference = results
        assert all(x.transpose(1, 2).is_contiguous() for x in ours)
        for a, b in zip(ours, reference, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_dense_inputs_give_results_in_their_own_layout():
    """Contiguous (B, h, T, D) inputs (no model's view) give outputs and gradients laid out the
    same, so that nothing downstream copies them."""
    pattern = next(patterns("fibonacci-learned-fibonacci"))
    for position_major in (False, True):
        q, k, v = inputs(40, position_major=position_major)
        out, dq, dk, dv, _ = run(compiled.compiled_attention, q, k, v, pattern)
        assert out.stride() == dq.stride() == q.stride() and dk.stride() == k.stride()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lower_precision_inputs_compute_in_float32(dtype):
    pattern = build_attention("fibonacci", window=4, schedule="linear").build(1, 2, 64)
    q, k, v = (x.detach() for x in inputs(64, dtype=torch.float32))
    expected = slots_attention(q, k, v, pattern.slots(64, q.device))
    out = compiled.compiled_attention(
        q.to(dtype), k.to(dtype), v.to(dtype), pattern.slots(64, q.device)
    )
    assert out.dtype == dtype
    tolerance = 1e-5 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(out.float(), expected, rtol=tolerance, atol=tolerance)


def test_results_are_bit_identical_whatever_the_threads_do():
    """Work items go to whichever thread is free, but every sum runs in a fixed order: one
    thread and two give the same bits, and so do repeated calls."""
    pattern = next(patterns("bigbird", training_length=300))  # absolute keys: the reader pass
    learned = next(patterns("fibonacci-learned-pow2", training_length=300))
    threads = torch.get_num_threads()
    try:
        for case in (pattern, learned):
            q, k, v = inputs(300, dtype=torch.float32)
            torch.set_num_threads(2)
            first, second = run(compiled.compiled_attention, q, k, v, case), None
            second = run(compiled.compiled_attention, q, k, v, case)
            torch.set_num_threads(1)
            alone = run(compiled.compiled_attention, q, k, v, case)
            for a, b, c in zip(first, second, alone, strict=True):
                assert torch.equal(a, b) and torch.equal(a, c)
    finally:
        torch.set_num_threads(threads)


def test_the_model_dispatches_cpu_tensors_to_it(monkeypatch):
    calls = []
    real = compiled.compiled_attention
    monkeypatch.setattr(compiled, "compiled_attention", lambda *a: calls.append(1) or real(*a))
    pattern = build_attention("fibonacci").build(0, 1, 64)
    q, k, v = (x.detach() for x in inputs(64, dtype=torch.float32))
    sparse_attention(q, k, v, pattern.slots(64, q.device))
    assert calls == [1]


@pytest.mark.slow
def test_without_the_compiled_kernel_the_sparse_blas_one_runs():
    """LIT_SPARSE_CPU_KERNEL=csr (as where no compiler exists): same results, no build."""
    code = (
        "import torch\n"
        "from lit_sparse import build_attention\n"
        "from lit_sparse.kernels import compiled, sparse_attention\n"
        "from lit_sparse.kernels.reference import slots_attention\n"
        "assert not compiled.available()\n"
        "p = build_attention('fibonacci', schedule='learned').build(0, 1, 64)\n"
        "q, k, v = torch.randn(1, 4, 64, 8), torch.randn(1, 2, 64, 8), torch.randn(1, 2, 64, 8)\n"
        "s = p.slots(64, q.device)\n"
        "torch.testing.assert_close(sparse_attention(q, k, v, s), slots_attention(q, k, v, s))\n"
        "print('csr ok')\n"
    )
    env = {**os.environ, "LIT_SPARSE_CPU_KERNEL": "csr"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "csr ok" in done.stdout


def test_the_build_is_keyed_by_torch_the_python_abi_and_the_source(monkeypatch, tmp_path):
    """Two environments (another torch, another Python, another ninja) or two checkouts
    (another source) get their own build folders instead of rebuilding over each other's."""
    name = build.build_name()
    assert name == build.build_name()  # stable
    monkeypatch.setattr(build.torch, "__version__", "0.0.1")
    assert build.build_name() != name
    monkeypatch.undo()
    monkeypatch.setattr(build.sysconfig, "get_config_var", lambda key: "cpython-399-x")
    assert build.build_name() != name
    monkeypatch.undo()
    monkeypatch.setattr(build, "_ninja", lambda: ("1.11.1", None))
    assert build.build_name() != name
    monkeypatch.undo()
    monkeypatch.setattr(build.torch, "__file__", "/another/venv/torch/__init__.py")
    assert build.build_name() != name  # the same torch version in another environment
    monkeypatch.undo()
    source = tmp_path / "slots_cpu.cpp"
    source.write_text(build.SOURCE.read_text() + "\n// edited\n")
    monkeypatch.setattr(build, "SOURCE", source)
    assert build.build_name() != name
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    assert build.build_directory("x") == tmp_path / "ext" / "x"


@pytest.mark.slow
def test_a_lock_left_by_a_killed_build_does_not_hang_the_next_load(tmp_path, monkeypatch):
    """torch's loader waits forever on a lock file a killed process left in the build folder;
    the next load removes it (its flock shows no live process holds the folder). Built from
    a stand-in source: a copy of the kernel's built folder elsewhere rebuilds (torch writes
    the folder's path into build.ninja), and the lock is the same whatever the source."""
    source = tmp_path / "stand_in.cpp"
    source.write_text(STAND_IN)
    monkeypatch.setattr(build, "SOURCE", source)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    folder = build.build_directory(build.build_name())
    folder.mkdir(parents=True)
    (folder / "lock").touch()  # what a SIGKILL during a load leaves behind
    code = (
        "from pathlib import Path\nfrom lit_sparse.kernels import build\n"
        f"build.SOURCE = Path({str(source)!r})\nprint(build.available())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert done.stdout.strip() == "True", done.stderr
    assert "stale build lock" in done.stderr
    assert not (folder / "lock").exists()


def _bad_slots() -> dict:
    """Slots that would read outside q, k, v (or after the query): one broken field each."""
    from lit_sparse.kernels import KeySlots

    keys = torch.tensor([[0, -1], [3, 5]])
    return {
        "distance -1 is negative": KeySlots(torch.tensor([-1, 0, 1]), reach=2),
        "rung lo -3 is negative": KeySlots(
            torch.tensor([0, 1]),
            reach=4,
            rung_lo=torch.tensor([2, -3]),
            rung_frac=torch.tensor([0.5, 0.5]),
            rung_valid=torch.tensor([True, True]),
        ),
        "absolute key -3 is negative": KeySlots(
            torch.tensor([0]), reach=1, block_keys=keys - 2, block_size=8, min_abs_distance=1
        ),
        "min_abs_distance=-4 must be >= 0": KeySlots(
            torch.tensor([0]), reach=1, block_keys=keys, block_size=8, min_abs_distance=-4
        ),
        "block_keys has 2 blocks; 16 positions in blocks of 4 need 4": KeySlots(
            torch.tensor([0]), reach=1, block_keys=keys, block_size=4, min_abs_distance=1
        ),
    }


@pytest.mark.parametrize("problem", sorted(_bad_slots()))
def test_slots_that_would_read_outside_the_inputs_are_refused(problem):
    """Both CPU kernels refuse them in Python (one ValueError naming the kernel and the
    value); the compiled extension, called directly, refuses them too (no Python guard)."""
    from lit_sparse.kernels.csr import csr_attention

    slots = _bad_slots()[problem]
    q, k, v = inputs(16, dtype=torch.float32)
    for path, who in ((compiled.compiled_attention, "compiled"), (csr_attention, "CSR")):
        with pytest.raises(ValueError, match=f"the {who} CPU kernel: .*{re.escape(problem)}"):
            path(q, k, v, slots)
    if problem != "absolute key -3 is negative":  # the extension skips every key < 0
        exact = slots.distances
        lo = slots.rung_lo if slots.n_rungs else torch.zeros(0, dtype=torch.long)
        frac = slots.rung_frac.double() if slots.n_rungs else torch.zeros(0, dtype=torch.float64)
        keys = slots.block_keys if slots.n_absolute else torch.zeros(0, 0, dtype=torch.long)
        q_rows, k_rows, v_rows = (x.detach() for x in (q, k, v))
        with pytest.raises(RuntimeError, match="is negative|do not cover"):
            build.extension().forward(
                q_rows, k_rows, v_rows, exact, lo, frac, keys, slots.block_size,
                slots.min_abs_distance, 1,
            )  # fmt: skip


@pytest.mark.slow
def test_two_checkouts_of_one_commit_share_one_build_and_never_rebuild(tmp_path):
    """torch writes the source's path into build.ninja: each checkout's own path made ninja
    rebuild (about a minute, silently) whenever another checkout had loaded last. The build
    reads its own copy of the source, so a checkout anywhere loads the same build. Nor does
    the ninja that PATH finds first matter (a system one, 1.11 here, logs commands under
    other hashes than the environment's 1.13: they took turns rebuilding): the build runs
    the ninja package's."""
    assert compiled.available()
    library = build.build_directory(build.build_name()) / f"{build.build_name()}.so"
    built_at = library.stat().st_mtime_ns
    path = os.environ.get("PATH", "")
    system_first = {**os.environ, "PATH": os.pathsep.join(["/usr/bin", "/bin", path])}
    environment_first = {
        **os.environ,
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), path]),
    }
    for checkout, env in (("a", system_first), ("b", environment_first), ("a", system_first)):
        source = tmp_path / checkout / "slots_cpu.cpp"
        source.parent.mkdir(exist_ok=True)
        source.write_bytes(build.SOURCE.read_bytes())
        code = (
            "from pathlib import Path\nfrom lit_sparse.kernels import build\n"
            f"build.SOURCE = Path({str(source)!r})\nprint(build.available())"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env
        )
        assert done.stdout.strip() == "True", done.stderr
        assert "built" not in done.stderr, done.stderr
        assert library.stat().st_mtime_ns == built_at, f"rebuilt for checkout {checkout}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [64, 128])
def test_wide_heads_and_many_slots_equal_the_reference(dim, dtype):
    """The paper's head dim (64) and wider, and more than 64 slots a query: every vector loop
    runs past at::vec's widest load. Its loadu takes a count of at most one vector; a count
    of 64 or more once built an empty lane mask on AVX-512 (zeros: every output wrong) and
    overflowed a buffer on AVX2."""
    tolerance = 1e-10 if dtype == torch.float64 else 1e-4
    for plugin in (build_attention("sliding_window", window=80), build_attention("fibonacci")):
        pattern = plugin.build(0, 1, 96).to(dtype)
        q, k, v = inputs(96, dim=dim, dtype=dtype)
        ours = run(compiled.compiled_attention, q, k, v, pattern)
        reference = run(slots_attention, q, k, v, pattern)
        for a, b in zip(ours, reference, strict=True):
            torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("plugin", ["sliding_window", "fibonacci"])
def test_decoding_with_wide_heads_equals_the_full_forward(plugin):
    """A decoding step reads the same vectors: each token's logits, decoded one at a time
    through the cache, equal the whole sequence's forward at head dim 64 with 81 slots."""
    from lit_sparse import LanguageModel, ModelConfig

    config = ModelConfig(vocab_size=64, context_length=96, n_layers=2, d_model=128, n_heads=2,
                         n_kv_heads=1, head_dim=64, ffn_hidden=0)  # fmt: skip
    options = {"window": 80} if plugin == "sliding_window" else {}
    model = LanguageModel(config, build_attention(plugin, **options)).double().eval()
    tokens = torch.randint(0, 64, (2, 100), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        full = model(tokens)
        cache = model.new_cache(2, 100)
        steps = [model(tokens[:, :4], cache)]
        steps += [model(tokens[:, t : t + 1], cache) for t in range(4, 100)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-9, atol=1e-9)
