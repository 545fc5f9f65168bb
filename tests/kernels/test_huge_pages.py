"""Large kernel buffers ask for transparent huge pages; small ones are left alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from lit_sparse.kernels import huge_pages

THP = Path("/sys/kernel/mm/transparent_hugepage")
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not THP.exists(),
    reason="needs Linux with transparent huge pages",
)


def vm_flags(address: int) -> set[str]:
    """The VmFlags of the mapping of this process that holds ``address``."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "VmFlags:":
                return set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


def test_a_large_buffer_is_advised_huge_pages():
    tensor = huge_pages.empty(4, 1 << 20, dtype=torch.float32)  # 16 MB
    assert tensor.shape == (4, 1 << 20) and tensor.dtype == torch.float32
    middle = tensor.data_ptr() + tensor.numel() * tensor.element_size() // 2
    assert "hg" in vm_flags(middle)  # VM_HUGEPAGE: madvise(MADV_HUGEPAGE) was applied
    tensor.fill_(1.5)
    assert tensor.sum().item() == 1.5 * tensor.numel()


SMALL = """
import torch
from lit_sparse.kernels import huge_pages
from tests.kernels.test_huge_pages import vm_flags

tensor = huge_pages.empty(3, 5, dtype=torch.float64)
assert tensor.shape == (3, 5) and tensor.dtype == torch.float64
print(sorted(vm_flags(tensor.data_ptr())))
"""


def test_a_small_buffer_is_an_ordinary_tensor():
    """In a fresh process: in a long one (a test worker) a small block can land in a heap
    mapping an earlier large buffer had advised, which says nothing about this one."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", SMALL], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "'hg'" not in done.stdout and "'rd'" in done.stdout  # read, not huge-page advised
