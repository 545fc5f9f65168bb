"""How every bench measures: interleaved timed rounds, peak memory, copy bandwidth, busy cores.

- ``ms``: the plugins of one measurement run in one process on the same inputs: each is
  warmed up (a small call, then one full-size call), then they are timed in interleaved
  rounds, one call of each per round, so a change in the machine's load hits all alike; up
  to ``repeats`` rounds (fewer once ``budget`` seconds per plugin are spent); the median.
- peak memory: on the CPU the rise in the process's peak resident set (VmHWM) over
  one call, meaningful in a fresh process only (or a fork of one that has run nothing: a
  fork's VmHWM starts at its resident set); on CUDA the allocator's peak.
- bandwidth: one large device copy, best of five (the first touches fresh pages).
- compute peak: an fp32 matrix product of 2048 x 2048 matrices, best of five, in the same
  process and at its thread count (the rate the machine's BLAS reaches, not a datasheet's).
- busy cores: processes that spin on a core each while the timed rounds run.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "busy_cores",
    "call_peak_mb",
    "cell",
    "copy_bandwidth",
    "matmul_flops",
    "interleaved_rounds",
    "median",
    "peak_rss_mb",
    "progress",
    "release",
    "run_child",
    "sync",
    "time_plugins",
]

Case = Callable[[int], Callable[[], None]]
"""case(length) -> run(): one call of a plugin at ``length``."""


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _peak_bytes(device) -> int:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return int(peak_rss_mb() * 2**20)


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_of_five(call: Callable[[], Any], device) -> float:
    """Seconds of the fastest of five calls, after a first one that is not counted (it
    touches fresh pages, warms up)."""
    seconds = []
    for _ in range(6):
        sync(device)
        start = time.perf_counter()
        call()
        sync(device)
        seconds.append(time.perf_counter() - start)
    return min(seconds[1:])


def copy_bandwidth(device) -> float:
    """Bytes per second (read + written) of one large copy on ``device``, best of five."""
    import torch

    size = (2 << 30) if device.type == "cuda" else (256 << 20)
    source = torch.ones(size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    return 2 * size / _best_of_five(lambda: target.copy_(source), device)


def matmul_flops(device, size: int = 2048) -> float:
    """FLOP per second of one float32 ``size`` x ``size`` matrix product on ``device``
    (2 size^3 FLOPs), best of five after a warm-up call."""
    import torch

    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    return 2 * size**3 / _best_of_five(lambda: torch.mm(a, b), device)


def cell(row: dict[str, Any], key: str, fmt: str) -> str:
    """A table cell: ``row[key]`` formatted with ``fmt``, "-" where it is missing."""
    value = row.get(key)
    return "-" if value is None else format(value, fmt)


def call_peak_mb(run: Callable[[], None], device) -> float:
    """The rise in peak memory over one call of ``run``: the process's resident set on the
    CPU (meaningful in a fresh process only, or a fork of one), the allocator's peak on
    CUDA."""
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    before = _peak_bytes(device) if device.type == "cpu" else torch.cuda.memory_allocated(device)
    run()
    sync(device)
    return max(0, _peak_bytes(device) - before) / 2**20


SPIN = "while True: pass"


@contextlib.contextmanager
def busy_cores(count: int):
    """``count`` processes that spin on a core each (an unrelated load: another job, a data
    loader) while the block runs; stopped after it."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        if spinners:
            time.sleep(0.5)  # started and spinning before the first timed call
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def release(device) -> None:
    """Hand back what a failed plugin left allocated (its tensors are unreachable by now)."""
    import gc

    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def interleaved_rounds(
    runs: dict[str, Callable[[], None]],
    repeats: int,
    budget: float = float("inf"),
    device=None,
    on_round: Callable[[int], None] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each of ``runs``, timed in interleaved rounds (one call of each
    per round): up to ``repeats`` rounds, fewer once ``budget`` seconds per run are spent."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    rounds, spent = 0, 0.0
    while runs and rounds < repeats and not (rounds and spent > budget * len(runs)):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            if device is not None:
                sync(device)
            times[name].append(time.perf_counter() - start)
            spent += times[name][-1]
        rounds += 1
        if on_round is not None:
            on_round(rounds)
    return times


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def peak_rss_mb() -> float:
    """This process's peak resident set so far: Linux's VmHWM, the high-water mark of this
    process's own memory. (``ru_maxrss`` would count the parent's resident set at the fork
    before the exec: a child of a 1.5 GB process reports 1.5 GB at its first line.)"""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def run_child(module: str, job: dict[str, Any]) -> dict[str, Any] | None:
    """``python -m <module> <job as JSON>`` in a fresh process: its last stdout line as JSON
    (None when it fails; its progress goes straight to our stderr)."""
    command = [sys.executable, "-m", module, json.dumps(job)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    if done.returncode != 0:
        progress(f"{job.get('mode', 'bench')} process failed (exit {done.returncode})")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_plugins(spec: dict[str, Any], make_case: Callable[[str], tuple[Case, Any]]) -> dict:
    """Every plugin of ``spec["plugins"]`` (``make_case(plugin) -> (case, device)``) warmed
    up, then timed in interleaved rounds, once per value of ``spec["busy_cores"]``. A plugin
    that fails (out of memory, say) is reported under ``failed``; the rest run. Returns
    ``{"peaks": {plugin: MB} (CUDA), "failed": {plugin: why}, "busy": {"N": {plugin:
    {"ms", "runs"}}}, "info": {plugin: {"first_s": the first full-size call's seconds, and
    what the case's ``info`` dict holds}}}``."""
    import torch

    device = torch.device(spec["device"])
    runs, peaks, failed, info = {}, {}, {}, {}
    for plugin in spec["plugins"]:
        try:
            case, _ = make_case(plugin)
            case(min(64, spec["length"]))()
            sync(device)
            run = case(spec["length"])
            start = time.perf_counter()
            run()  # the first full-size call: allocations, page faults, compilation
            sync(device)
            info[plugin] = {**getattr(case, "info", {}), "first_s": time.perf_counter() - start}
            if device.type == "cuda":  # the allocator's peak over a steady call
                peaks[plugin] = call_peak_mb(run, device)
            runs[plugin] = run
        except Exception as error:  # any failure of one plugin spares the others
            failed[plugin] = f"{type(error).__name__}: {error}"[:500]
            progress(f"T={spec['length']} {plugin}: failed: {failed[plugin]}")
        if plugin in failed:  # outside the handler: its traceback holds the failed frames
            run = case = None
            release(device)
    timed = {}
    for busy in spec["busy_cores"]:
        load = f", {busy} busy core{'s' * (busy != 1)}" if busy else ""

        def timed_round(n: int, load: str = load) -> None:
            progress(f"T={spec['length']}: round {n} timed{load}")

        with busy_cores(busy):
            times = interleaved_rounds(runs, spec["repeats"], spec["budget"], device, timed_round)
        timed[str(busy)] = {
            plugin: {"ms": 1e3 * median(ts), "runs": len(ts)} for plugin, ts in times.items()
        }
    return {
        "peaks": peaks if device.type == "cuda" else None,
        "failed": failed,
        "busy": timed,
        "info": info,
    }
