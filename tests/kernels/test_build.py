"""The CPU kernel's build in a cache folder it cannot write: read-only (the build it holds
loads; without one, one line), full (one line); then the sparse-BLAS kernel runs."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import sys

import pytest
import torch

from lit_sparse import build_attention
from lit_sparse.kernels import build, sparse_attention
from lit_sparse.kernels.reference import slots_attention
from tests.kernels.stand_in import STAND_IN


@pytest.fixture
def fresh_extension():
    """extension() forgets its result before and after (the process's real one comes back)."""
    extension = build.extension
    extension.cache_clear()
    yield extension
    extension.cache_clear()


def the_csr_kernel_runs() -> bool:
    """Whether sparse_attention (with extension() None) equals the reference."""
    pattern = build_attention("fibonacci", window=2).build(0, 1, 32).double()
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 32, 8, generator=gen, dtype=torch.float64) for _ in range(3))
    slots = pattern.slots(32, q.device)
    return torch.allclose(sparse_attention(q, k, v, slots), slots_attention(q, k, v, slots))


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        RuntimeError(
            "Error building extension 'x': [1/2] c++ -MMD -MF slots_cpu.o.d -O3 -c slots_cpu.cpp\n"
            "FAILED: slots_cpu.o\n/usr/bin/ld: final link failed: No space left on device\n"
            "ninja: build stopped: subcommand failed."
        ),
    ],
    ids=["oserror", "compiler"],
)
def test_a_full_cache_folder_is_one_line_then_the_sparse_blas_kernel(
    failure, fresh_extension, tmp_path, monkeypatch, caplog
):
    """A full disk while building (the source's copy, the compiler, the linker) is named as
    one in one line, with the way out; the CSR path then runs."""
    import torch.utils.cpp_extension

    def full(**kwargs):
        raise failure

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setattr(torch.utils.cpp_extension, "load", full)
    with caplog.at_level(logging.WARNING, logger=build.__name__):
        assert fresh_extension() is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert "\n" not in line
    assert "no space left on the device of its build folder" in line
    assert str(tmp_path / "ext") in line and "TORCH_EXTENSIONS_DIR" in line
    assert line.endswith("using the sparse-BLAS kernel")
    assert the_csr_kernel_runs()


CHILD = """
import os, sys
from pathlib import Path
from lit_sparse.kernels import build
build.SOURCE = Path(sys.argv[1])
for cache in sys.argv[2:]:
    build.extension.cache_clear()
    os.environ["TORCH_EXTENSIONS_DIR"] = cache
    print(build.available(), flush=True)
"""


@pytest.mark.slow  # a stand-in build (a few seconds) and a process without write access
def test_a_read_only_cache_folder_loads_its_build_or_says_so_in_one_line(
    fresh_extension, tmp_path, monkeypatch
):
    """Torch's loader writes a lock file and build.ninja before it even looks at a finished
    build: a read-only cache holding one loads it as it is; an empty read-only cache is one
    line naming the folder and TORCH_EXTENSIONS_DIR, and the CSR path runs."""
    source = tmp_path / "stand_in.cpp"
    source.write_text(STAND_IN)
    monkeypatch.setattr(build, "SOURCE", source)
    built, empty = tmp_path / "built", tmp_path / "empty"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(built))
    assert fresh_extension() is not None  # the stand-in, built where the child will read it
    empty.mkdir()
    for folder in (built, empty):
        for path in (folder, *folder.rglob("*")):
            path.chmod(path.stat().st_mode & ~0o222)
    command = [sys.executable, "-c", CHILD, str(source), str(built), str(empty)]
    if os.geteuid() == 0:  # root writes anywhere: run the child without that capability
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: no folder is read-only to us")
        caps = "-dac_override,-dac_read_search"
        command = [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", *command]
    root = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"], done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # nothing for the built one, one line for the empty one
    assert f"its build folder {empty}/" in lines[0] and "is not writable" in lines[0]
    assert "TORCH_EXTENSIONS_DIR" in lines[0] and "sparse-BLAS kernel" in lines[0]
    monkeypatch.setattr(build, "extension", lambda: None)  # what the empty one's child had
    assert the_csr_kernel_runs()
