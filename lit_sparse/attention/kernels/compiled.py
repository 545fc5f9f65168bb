"""The compiled CPU kernel: ``slots_cpu.cpp``, built on first use by torch's C++ extension
loader and cached (``$TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``).

The op is plain loops over each query's slots, threads taking small work items from a shared
counter (see the source's header). Building needs a C++ compiler and ninja (a dependency);
it takes about a minute, once per build key: the CPU, the torch version, the Python ABI, the
ninja version (the ``ninja`` package's binary runs the build), the folders of torch and of
the Python headers (written into the build file) and the source's hash, so
environments and checkouts that differ in any of them keep their own builds side by side
instead of rebuilding over each other. Where it cannot be built, or with
``LIT_SPARSE_CPU_KERNEL=csr``, :func:`available` is False and the sparse-BLAS kernel
(``csr.py``) runs instead; the reason is logged once.

Threads: :func:`usable_threads` counts the cores this process may use: the CPU affinity
mask, a cgroup CPU quota (a container's ``cpu.max``, or cgroup v1's CFS quota), and torch's
own thread setting, whichever is smallest. ``os.cpu_count()`` alone overcounts in both cases.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
import os
import platform
import sys
import sysconfig
import time
from pathlib import Path

import torch
from torch import Tensor

from lit_sparse.attention.kernels.slots import KeySlots, rung_grad
from lit_sparse.io.atomic import write_bytes

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("slots_cpu.cpp")
_FLAGS = ["-O3", "-march=native", "-fno-math-errno"]
"""-march=native: the source picks at::vec's AVX-512 or AVX2 code from what the CPU has."""


def _cpu_signature() -> str:
    """A short hash of the CPU's model and features: -march=native code is built per CPU,
    so a shared cache folder never hands one machine another's binary."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        lines = [ln for ln in info.splitlines() if ln.startswith(("model name", "flags"))][:2]
    except OSError:
        lines = [platform.processor()]
    text = "\n".join([platform.machine(), *lines])
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _ninja() -> tuple[str, str | None]:
    """The version and folder of the ``ninja`` package's binary (a dependency), the one the
    build runs: ninja versions hash commands differently in ``.ninja_log`` (1.11 and 1.13
    each read the other's entry as a changed command), so a system ninja earlier on PATH and
    the environment's took turns rebuilding the same folder."""
    try:
        import ninja
    except ImportError:  # torch's own check then names what is missing
        return "", None
    return getattr(ninja, "__version__", ""), getattr(ninja, "BIN_DIR", None)


@contextlib.contextmanager
def _ninja_first_on_path():
    """PATH with the ``ninja`` package's binary first while torch's loader runs ninja."""
    _, folder = _ninja()
    saved = os.environ.get("PATH", "")
    if folder:
        os.environ["PATH"] = os.pathsep.join([folder, saved])
    try:
        yield
    finally:
        os.environ["PATH"] = saved


def build_name() -> str:
    """The extension's name, which names its build folder: the CPU's signature and a hash of
    the torch version, the Python ABI, torch's and the Python headers' folders, the compiler
    flags, the ninja version and the source."""
    abi = sysconfig.get_config_var("SOABI") or sys.implementation.cache_tag
    # the include and library folders torch writes into build.ninja: two environments of one
    # torch version (a CI venv beside a developer's) would each rebuild the other's folder
    folders = [str(Path(torch.__file__).parent), sysconfig.get_paths()["include"]]
    parts = [torch.__version__, abi, *folders, " ".join(_FLAGS), _ninja()[0], SOURCE.read_text()]
    digest = hashlib.sha1("\0".join(parts).encode()).hexdigest()[:12]
    return f"lit_sparse_slots_cpu_{_cpu_signature()}_{digest}"


def build_directory(name: str) -> Path:
    """Where the extension ``name`` is built (``$TORCH_EXTENSIONS_DIR``, default
    ``~/.cache/torch_extensions``)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions"
    return Path(root) / name


def build_source(folder: Path) -> Path:
    """The source, copied into its build folder once, and built from there.

    torch writes the source's absolute path into ``build.ninja``, and ninja rebuilds when that
    line changes: built from each checkout's own file, two checkouts of one commit (a
    worktree, CI beside a clone) would rebuild over each other at every switch. The folder's
    name holds the source's hash, so its copy is the same bytes for every checkout."""
    copy, source = folder / SOURCE.name, SOURCE.read_bytes()
    if not copy.is_file() or copy.read_bytes() != source:
        write_bytes(copy, source)
    return copy


@contextlib.contextmanager
def build_lock(folder: Path):
    """Hold the build folder for one process at a time, and clear a lock torch left behind.

    torch's loader guards each build folder with a lock *file* that it deletes when done; a
    process killed while loading (SIGKILL, an OOM kill, a killed test run) leaves the file,
    and every later load then waits for it forever. An ``flock`` dies with its process, so
    while this process holds one, a torch lock file in the folder is stale and removed.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: torch's own lock file only
        yield
        return
    with open(folder / "lit_sparse.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            stale = folder / "lock"
            if stale.exists():
                log.warning("removing a stale build lock left by a killed process: %s", stale)
                stale.unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@functools.cache
def _extension():
    """The built module, or None (the reason logged once). A first build says so on stderr
    when it starts and when it is done (about a minute)."""
    if os.environ.get("LIT_SPARSE_CPU_KERNEL", "").strip().lower() == "csr":
        return None
    try:
        from torch.utils.cpp_extension import load

        name = build_name()
        folder = build_directory(name)
        library = folder / f"{name}.so"
        built_at = library.stat().st_mtime_ns if library.is_file() else None
        if built_at is None:
            print(
                "building the CPU attention kernel (once per torch install and CPU, about a "
                f"minute) in {folder} ...",
                file=sys.stderr,
                flush=True,
            )
        start = time.perf_counter()
        folder.mkdir(parents=True, exist_ok=True)
        with build_lock(folder), _ninja_first_on_path():
            module = load(
                name=name,
                sources=[str(build_source(folder))],
                extra_cflags=_FLAGS,
                build_directory=str(folder),
                verbose=False,
            )
        if built_at is None or library.stat().st_mtime_ns != built_at:
            again = "" if built_at is None else "re"
            seconds = time.perf_counter() - start
            print(f"{again}built the CPU attention kernel in {seconds:.0f} s", file=sys.stderr)
        return module
    except Exception as err:  # no compiler, no ninja, unsupported platform
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        log.warning("compiled CPU kernel unavailable (%s); using the sparse-BLAS kernel", first)
        return None


def available() -> bool:
    """Whether the compiled kernel is built (building it on the first call)."""
    return _extension() is not None


def cgroup_cpus(
    root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")
) -> float | None:
    """CPUs the cgroup quotas allow this process, None when there is none: the smallest
    quota of the process's own cgroup and its ancestors (``membership`` says which it is),
    cgroup v2's ``cpu.max`` or v1's CFS quota over its period."""
    quotas = [_quota(folder, v1) for folder, v1 in _cgroup_folders(root, membership)]
    found = [q for q in quotas if q is not None]
    return min(found) if found else None


def _cgroup_folders(root: Path, membership: Path) -> list[tuple[Path, bool]]:
    """(folder, is v1) for the process's cpu cgroup and every ancestor, v2 and v1 layouts."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        lines = []
    v2_path, v1_path = "/", "/"
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            v2_path = path or "/"
        elif "cpu" in controllers.split(","):
            v1_path = path or "/"
    folders = []
    for base, path, v1 in (
        (root, v2_path, False),
        (root / "unified", v2_path, False),
        (root / "cpu", v1_path, True),
        (root / "cpu,cpuacct", v1_path, True),
    ):
        folder = base / path.strip("/")
        while True:
            folders.append((folder, v1))
            if folder == base:
                break
            folder = folder.parent
    return folders


def _quota(folder: Path, v1: bool) -> float | None:
    try:
        if v1:
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        else:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
        return None if quota in ("max", "-1") else int(quota) / int(period)
    except (OSError, ValueError):
        return None


@functools.cache
def _machine_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpus()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def usable_cores() -> int:
    """The CPU cores this process may use: its affinity and its cgroup's CPU quota, the least
    (also what ``fit`` allows CPU training processes and ``bench`` spinning processes)."""
    return _machine_threads()


def usable_threads() -> int:
    """Threads for one call: affinity, cgroup quota and torch.get_num_threads(), the least."""
    return max(1, min(_machine_threads(), torch.get_num_threads()))


def _resolve(slots: KeySlots, length: int):
    """The slots against ``length``: exact distances that can be valid, the used rungs (and
    their indices into the slots' rungs), the absolute keys and who reads each of them.
    Slots that would read outside q, k, v are a ValueError (:meth:`KeySlots.check`)."""
    slots.check(length, "the compiled CPU kernel", built=False)
    exact = slots.distances.to("cpu", torch.long)
    exact = exact[exact < length].contiguous()
    keep = lo = frac = None
    if slots.n_rungs:
        lo_all = slots.rung_lo.detach().to("cpu", torch.long)
        keep = torch.nonzero(slots.rung_valid.to("cpu") & (lo_all < length)).flatten()
        lo = lo_all[keep].contiguous()
        frac = slots.rung_frac.detach().to("cpu", torch.float64)[keep].contiguous()
    else:
        lo = torch.zeros(0, dtype=torch.long)
        frac = torch.zeros(0, dtype=torch.float64)
    empty = torch.zeros(0, dtype=torch.long)
    block_keys, readers = torch.zeros(0, 0, dtype=torch.long), (empty, empty, empty)
    if slots.n_absolute:
        n_blocks = -(-length // slots.block_size)
        block_keys = slots.block_keys[:n_blocks].to("cpu", torch.long).contiguous()
        readers = _readers(block_keys, length)
    return exact, keep, lo, frac, block_keys, readers


def _readers(block_keys: Tensor, length: int) -> tuple[Tensor, Tensor, Tensor]:
    """For each key row, the (block, slot) pairs that draw it, as CSR arrays ordered by key
    and then block: (ptr (T + 1,), block, slot)."""
    n_blocks, n_abs = block_keys.shape
    keys = block_keys.reshape(-1)
    blocks = torch.arange(n_blocks).repeat_interleave(n_abs)
    slot = torch.arange(n_abs).repeat(n_blocks)
    used = (keys >= 0) & (keys < length)
    keys, blocks, slot = keys[used], blocks[used], slot[used]
    order = torch.argsort(keys * n_blocks + blocks, stable=True)
    keys, blocks, slot = keys[order], blocks[order], slot[order]
    ptr = torch.zeros(length + 1, dtype=torch.long)
    ptr[1:] = torch.cumsum(torch.bincount(keys, minlength=length), 0)
    return ptr, blocks.contiguous(), slot.contiguous()


def _position_major(x: Tensor, dtype: torch.dtype) -> Tensor:
    """x (B, heads, T, D) as a contiguous (B, T, heads, D) tensor (a view when it is one)."""
    return x.transpose(1, 2).to(dtype).contiguous()


class _CompiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, frac_in, slots: KeySlots):
        dtype = torch.promote_types(q.dtype, torch.float32)
        length = q.shape[2]
        exact, keep, lo, frac, block_keys, readers = _resolve(slots, length)
        with torch.autocast("cpu", enabled=False):
            q_pm, k_pm, v_pm = (_position_major(x, dtype) for x in (q, k, v))
            threads = usable_threads()
            out, probs = _extension().forward(
                q_pm, k_pm, v_pm, exact, lo, frac, block_keys, slots.block_size,
                slots.min_abs_distance, threads,
            )  # fmt: skip
        ctx.save_for_backward(q_pm, k_pm, v_pm, out, probs)
        ctx.slots = (exact, lo, frac, block_keys, slots.block_size, slots.min_abs_distance)
        ctx.readers, ctx.keep, ctx.n_rungs = readers, keep, slots.n_rungs
        ctx.dtypes, ctx.frac_dtype = (q.dtype, k.dtype, v.dtype), frac_in.dtype
        return out.transpose(1, 2).to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        q_pm, k_pm, v_pm, out, probs = ctx.saved_tensors
        with torch.autocast("cpu", enabled=False):
            dout = _position_major(grad_out, q_pm.dtype)
            dq, dk, dv, dfrac = _extension().backward(
                q_pm, k_pm, v_pm, out, dout, probs, *ctx.slots, *ctx.readers, usable_threads()
            )
        d_frac = rung_grad(dfrac, ctx.keep, ctx.n_rungs, ctx.frac_dtype)
        q_dtype, k_dtype, v_dtype = ctx.dtypes
        return (
            dq.transpose(1, 2).to(q_dtype),
            dk.transpose(1, 2).to(k_dtype),
            dv.transpose(1, 2).to(v_dtype),
            d_frac,
            None,
        )


def compiled_attention(q: Tensor, k: Tensor, v: Tensor, slots: KeySlots) -> Tensor:
    """Causal attention of q (B, H, T, D) over the slots of k, v (B, KV, T, D), on the CPU,
    by the compiled kernel (call :func:`available` first)."""
    frac = slots.rung_frac if slots.n_rungs else q.new_empty(0)
    return _CompiledAttention.apply(q, k, v, frac, slots)


def decode_step(
    q: Tensor,
    ring_k: Tensor,
    ring_v: Tensor,
    position: int,
    back: Tensor,
    first: Tensor,
    frac: Tensor,
    block_keys: Tensor,
    block_size: int,
    min_abs: int,
) -> Tensor:
    """One decoding position over a layer's ring of cached rows (call :func:`available`
    first): q (B, H, D) and the ring's k, v (B, KV, C, D), position p in row p % C; ``back``
    (M + 2R,) how far back each relative row is, ``first`` (M + R,) the first position each
    exact slot and rung is valid at, ``frac`` (R,) float64 the rungs' upper-tap weights,
    ``block_keys`` (n_blocks, A) absolute keys or an empty tensor. Returns (B, H, D)."""
    (out,) = _extension().decode_step(
        q, ring_k, ring_v, position, back, first, frac, block_keys, block_size, min_abs
    )
    return out


def bf16_linear(x: Tensor, weight: Tensor) -> Tensor:
    """x (M, K) float32 times bfloat16 ``weight`` (N, K) transposed, summed in float32 (call
    :func:`available` first): (M, N)."""
    return _extension().bf16_linear(x, weight)


def int8_linear(x: Tensor, weight: Tensor, scale: Tensor) -> Tensor:
    """x (M, K) float32 times int8 ``weight`` (N, K; rows contiguous, possibly padded)
    transposed, each output channel times its float32 ``scale`` (N,), summed in float32
    (call :func:`available` first): (M, N)."""
    return _extension().int8_linear(x, weight, scale)
