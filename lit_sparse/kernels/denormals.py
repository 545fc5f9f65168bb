"""Subnormal floats as zero on every CPU thread torch computes on, while training.

A saturated softmax (a model sure of its answer, or one on a plateau that puts all its mass on
a few tokens) leaves probabilities and gradients below float32's smallest normal, 1.2e-38. An
x86 core computes on those subnormals through microcode, many times slower, and the backward's
matrix products then take most of a step: a far-MQAR step of a run on its plateau took 2.4x as
long as with subnormals flushed (docs/performance.md). Flushed, they read and write as zero;
eight steps of that run gave the same weights to the bit either way.

``torch.set_flush_denormal`` sets only the calling thread (the mode lives in each thread's
control register), so with several intra-op threads the others keep computing on subnormals;
:func:`flush_denormals` sets every thread of torch's pool through the compiled kernel's
``at::parallel_for``; :func:`flushed_denormals` holds that mode for a block (the LightningModule's
``FlushedSubnormals`` callback, through a CPU trainer's run). No Lightning here: a benchmark's
process that only times kernels does not pay its import.
``LIT_SPARSE_KEEP_DENORMALS=1`` keeps IEEE subnormals in training.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

import torch

from lit_sparse.kernels import compiled

log = logging.getLogger(__name__)

KEEP_VARIABLE = "LIT_SPARSE_KEEP_DENORMALS"
_SUBNORMAL = 1e-39  # below float32's smallest normal (1.18e-38), above its smallest subnormal


def denormals_flushed() -> bool:
    """Whether the calling thread reads and writes subnormal floats as zero."""
    return bool((torch.tensor([_SUBNORMAL]) * 1.0).item() == 0.0)


def denormals_flushed_everywhere() -> bool:
    """Whether the caller and every intra-op thread read and write subnormals as zero: a
    product spread over torch's pool keeps the subnormals of each thread's share that does
    not flush."""
    threads = torch.get_num_threads()
    if threads == 1:
        return denormals_flushed()
    # subnormals from their bits (a float made on a flushing thread would be zero already),
    # 4 of at::parallel_for's grains per thread
    bits = torch.full((threads * 4 * 32768,), 1 << 20, dtype=torch.int32)
    return not bool((bits.view(torch.float32) * 1.0).count_nonzero())


def flush_denormals(on: bool = True) -> bool:
    """Subnormals as zero (``on``) or IEEE (off) on the caller and every intra-op thread;
    False where the CPU has no such mode. With more than one thread this needs the compiled
    kernel (built on first use); without it only the caller is set, and a warning says so."""
    if torch.get_num_threads() == 1:
        return torch.set_flush_denormal(on)
    if compiled.available():
        return bool(compiled.extension().set_flush_denormal(on))
    if on:
        log.warning(
            "subnormal floats flushed on the main thread only (torch's other %d threads need "
            "the compiled CPU kernel)",
            torch.get_num_threads() - 1,
        )
    return torch.set_flush_denormal(on)


@contextlib.contextmanager
def flushed_denormals() -> Iterator[bool]:
    """Subnormals as zero on every intra-op thread inside, the caller's mode restored after
    on every thread (a caller that flushed only its own thread gets its workers back IEEE);
    unless ``LIT_SPARSE_KEEP_DENORMALS`` is set. Yields whether it flushes."""
    if os.environ.get(KEEP_VARIABLE, "") not in ("", "0"):
        yield False
        return
    caller, everywhere = denormals_flushed(), denormals_flushed_everywhere()
    flushing = flush_denormals(True)
    try:
        yield flushing
    finally:
        if flushing and not everywhere:
            flush_denormals(False)  # the pool's threads as they were (IEEE) ...
            if caller:  # ... and the caller's own, set alone by torch.set_flush_denormal(True)
                torch.set_flush_denormal(True)
