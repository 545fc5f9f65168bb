"""Builds ``slots_cpu.cpp`` on first use into a folder named by its build key (environments and
checkouts keep their builds apart); a failed build or ``LIT_SPARSE_CPU_KERNEL=csr`` leaves the
sparse-BLAS kernel to run."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import platform
import sys
import sysconfig
import time
from pathlib import Path

import torch

from lit_sparse.io.atomic import write_bytes

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("slots_cpu.cpp")
# native: at::vec's AVX-512 or AVX2 code; OpenMP: at::parallel_for is inline OpenMP in torch's
# headers, serial without it (torch's own libgomp.so.1, already loaded, serves the calls)
_FLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fopenmp"]


def _cpu_signature() -> str:
    """A hash of the CPU's model and features: a shared cache never hands one CPU another's
    -march=native binary."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        lines = [ln for ln in info.splitlines() if ln.startswith(("model name", "flags"))][:2]
    except OSError:
        lines = [platform.processor()]
    text = "\n".join([platform.machine(), *lines])
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _ninja() -> tuple[str, str | None]:
    """Version and folder of the ``ninja`` package's binary (versions hash ``.ninja_log``
    differently: two would rebuild each other's folder)."""
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
    """The extension's and build folder's name: the CPU's signature and a hash of everything
    the binary depends on (torch, the Python ABI, header folders, flags, ninja, the source)."""
    abi = sysconfig.get_config_var("SOABI") or sys.implementation.cache_tag
    # folders torch writes into build.ninja: two environments would rebuild each other's folder
    folders = [str(Path(torch.__file__).parent), sysconfig.get_paths()["include"]]
    parts = [torch.__version__, abi, *folders, " ".join(_FLAGS), _ninja()[0], SOURCE.read_text()]
    digest = hashlib.sha1("\0".join(parts).encode()).hexdigest()[:12]
    return f"lit_sparse_slots_cpu_{_cpu_signature()}_{digest}"


def build_directory(name: str) -> Path:
    """``$TORCH_EXTENSIONS_DIR`` (default ``~/.cache/torch_extensions``) / ``name``."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions"
    return Path(root) / name


def build_source(folder: Path) -> Path:
    """The source copied into its build folder: torch writes the source's path into
    ``build.ninja``, so two checkouts building their own files would rebuild over each other."""
    copy, source = folder / SOURCE.name, SOURCE.read_bytes()
    if not copy.is_file() or copy.read_bytes() != source:
        write_bytes(copy, source)
    return copy


@contextlib.contextmanager
def build_lock(folder: Path):
    """Hold the build folder for one process at a time and remove a lock file torch left: it
    outlives a killed process (later loads wait forever), an ``flock`` dies with its process."""
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


def _writable(folder: Path) -> str | None:
    """None when ``folder`` can be made and written in, else why not (``Permission denied``)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "lit_sparse.lock", "a"):
            return None
    except OSError as err:
        return err.strerror or type(err).__name__


def _import_built(name: str, library: Path):
    """The built ``library`` imported as it is: a read-only cache holding a finished build
    (torch's loader would write its lock file and build.ninja there first)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reason(err: BaseException, folder: Path | None) -> str:
    """A failed build in one line: a full disk named as one, else the error's first line."""
    text = str(err).strip()
    if (isinstance(err, OSError) and err.errno == errno.ENOSPC) or (
        "No space left on device" in text
    ):
        return (
            f"no space left on the device of its build folder {folder} (free some, or set "
            "TORCH_EXTENSIONS_DIR to a folder on another disk)"
        )
    first = text.splitlines()[0] if text else type(err).__name__
    return first if len(first) <= 300 else first[:297] + "..."


@functools.cache
def extension():
    """The built module, or None (the reason logged in one line); a first build says so on
    stderr. A read-only cache folder holding the build loads it; one without it, a full disk,
    no compiler: the sparse-BLAS kernel runs."""
    if os.environ.get("LIT_SPARSE_CPU_KERNEL", "").strip().lower() == "csr":
        return None
    folder = None
    try:
        from torch.utils.cpp_extension import load

        name = build_name()
        folder = build_directory(name)
        library = folder / f"{name}.so"
        built_at = library.stat().st_mtime_ns if library.is_file() else None
        unwritable = _writable(folder)
        if unwritable and built_at is not None:
            return _import_built(name, library)
        if unwritable:
            log.warning(
                "compiled CPU kernel unavailable: its build folder %s is not writable (%s; set "
                "TORCH_EXTENSIONS_DIR to a writable folder); using the sparse-BLAS kernel",
                folder,
                unwritable,
            )
            return None
        if built_at is None:
            print(
                "building the CPU attention kernel (once per torch install and CPU, about a "
                f"minute) in {folder} ...",
                file=sys.stderr,
                flush=True,
            )
        start = time.perf_counter()
        with build_lock(folder), _ninja_first_on_path():
            module = load(
                name=name,
                sources=[str(build_source(folder))],
                extra_cflags=_FLAGS,
                extra_ldflags=["-fopenmp"],
                build_directory=str(folder),
                verbose=False,
            )
        if built_at is None or library.stat().st_mtime_ns != built_at:
            again = "" if built_at is None else "re"
            seconds = time.perf_counter() - start
            print(f"{again}built the CPU attention kernel in {seconds:.0f} s", file=sys.stderr)
        return module
    except Exception as err:  # no compiler, no ninja, a full disk, unsupported platform
        reason = _reason(err, folder)
        log.warning("compiled CPU kernel unavailable (%s); using the sparse-BLAS kernel", reason)
        return None


def available() -> bool:
    """Whether the compiled kernel is built (building it on the first call)."""
    return extension() is not None
