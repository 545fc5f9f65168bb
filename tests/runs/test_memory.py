"""fit keeps freed memory in the process (lit_sparse.runs.memory): a large tensor freed and
allocated again every step is not faulted in anew; the environment variable turns it off."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# allocate and free a 64 MB tensor ten times (above glibc's largest mmap threshold, 32 MB):
# the minor page faults per round, after the first
_ROUNDS = """
import resource, sys, torch
from lit_sparse.runs.memory import keep_freed_memory
took = keep_freed_memory()
torch.ones(16 << 20).sum()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    torch.ones(16 << 20).sum()
print(took, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 10)
"""


def _faults_per_round(keep: str) -> tuple[str, int]:
    env = {**os.environ, "LIT_SPARSE_KEEP_FREED_MEMORY": keep}
    out = subprocess.run(
        [sys.executable, "-c", _ROUNDS], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_freed_tensor_is_reused_without_page_faults_and_the_variable_turns_it_off():
    took, kept = _faults_per_round("1")
    skipped, default = _faults_per_round("0")
    assert took == "True" and skipped == "False"
    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert default > pages // 2  # glibc's default: the tensor is mapped and faulted in anew
    assert kept <= pages // 5  # at most a fault-in or two over the ten rounds, not ten
