"""Keep freed memory in the process: glibc unmaps large freed blocks, so each training step would
fault its activations in anew; raising the mmap and trim thresholds keeps them."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_KEEP = 1 << 30  # allocations up to 1 GiB come from the heap and stay there when freed
ENV = "LIT_SPARSE_KEEP_FREED_MEMORY"
"""Set to 0 to leave glibc's allocator as it is."""


@functools.cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds once (unless ``LIT_SPARSE_KEEP_FREED_MEMORY=0``)."""
    if os.environ.get(ENV, "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries: nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _KEEP)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEEP))
