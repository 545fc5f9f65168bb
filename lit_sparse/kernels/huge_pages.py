"""Large CPU buffers on transparent huge pages where the system allows it (else a no-op): a
fresh multi-MB tensor faults on every 4 KB page at first write, ``madvise(MADV_HUGEPAGE)`` makes
those 2 MB faults, per buffer and from any process (unlike ``THP_MEM_ALLOC_ENABLE=1``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

import torch
from torch import Tensor

MIN_BYTES = 4 << 20
"""Smaller buffers keep ordinary pages (they are usually reused from the heap)."""
_HUGE_PAGE = 2 << 20
_MADV_HUGEPAGE = 14


@functools.cache
def _madvise():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    madvise = libc.madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise


def empty(*shape: int, dtype: torch.dtype) -> Tensor:
    """``torch.empty(shape, dtype=dtype)`` on the CPU, on huge pages when large enough."""
    tensor = torch.empty(*shape, dtype=dtype)
    nbytes = tensor.numel() * tensor.element_size()
    madvise = _madvise()
    if madvise is None or nbytes < MIN_BYTES:
        return tensor
    start = -(-tensor.data_ptr() // _HUGE_PAGE) * _HUGE_PAGE  # the whole huge pages inside
    stop = (tensor.data_ptr() + nbytes) // _HUGE_PAGE * _HUGE_PAGE
    if stop > start:
        madvise(start, stop - start, _MADV_HUGEPAGE)  # advice only: a failure changes nothing
    return tensor
