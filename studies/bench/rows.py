"""The processes of ``bench attention`` and ``bench train``: one fresh process per length times
every row (so rows share inputs and load); on the CPU each row's peak memory is measured
first, each in a fork of that process taken before it has run anything (on Linux; elsewhere
in a fresh process per row); their rows and table.

``speedup_vs_dense`` divides the dense time at the same length by the row's time, both from
the same process; ``speedup_vs_flex`` (attention) divides the time of the row's FlexAttention
peer (``flex:<plugin>``, forward only on the CPU) by the row's. ``floor_ms`` (attention
only): the time the op's unavoidable memory traffic
(:func:`lit_sparse_studies.bench.attention.floor_bytes`) takes at the copy bandwidth measured in the
timing process; ``x_floor`` is ``ms / floor_ms`` and ``gb_per_s`` that traffic over ``ms``.
``gflop_s`` (attention): the op's useful FLOPs
(:func:`lit_sparse_studies.bench.attention.useful_flops`) over ``ms``, and ``x_peak`` that rate over
an fp32 matrix product's in the same process (:func:`lit_sparse_studies.bench.timing.matmul_flops`).
A flex row also has ``block_density`` (the share of causal tiles its mask computes) and
``compile_s`` (its first full-size call less a timed one: compilation and the mask).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

from lit_sparse.io import call_in_fork
from lit_sparse_studies.bench import timing
from lit_sparse_studies.bench.attention import (
    attention_case,
    flex_peer,
    floor_bytes,
    is_flex,
    useful_flops,
)
from lit_sparse_studies.bench.timing import (
    call_peak_mb,
    cell,
    copy_bandwidth,
    matmul_flops,
    progress,
    sync,
    time_plugins,
)
from lit_sparse_studies.bench.train import train_case

__all__ = ["bench_table", "length_rows", "measure", "run_child", "run_lengths"]


def case_for(spec: dict[str, Any], plugin: str):
    """(case, device) of ``plugin`` for a spec of kind "attention" or "train"."""
    spec = {**spec, "plugin": plugin}
    return (train_case if spec["kind"] == "train" else attention_case)(spec)


def _memory(spec: dict[str, Any]) -> dict[str, Any]:
    """One row's peak: a small warm-up call, then the peak of one full call."""
    case, device = case_for(spec, spec["plugin"])
    case(min(64, spec["length"]))()  # warm-up: threads, allocator, kernels
    sync(device)
    return {"peak_mb": call_peak_mb(case(spec["length"]), device)}


def _timing(spec: dict[str, Any]) -> dict[str, Any]:
    """Every row of one length timed in interleaved rounds, and (attention) the copy
    bandwidth of the same process."""
    import torch

    measured = time_plugins(spec, lambda plugin: case_for(spec, plugin))
    device = torch.device(spec["device"])
    attention = spec["kind"] == "attention"
    measured["bandwidth"] = copy_bandwidth(device) if attention else None
    measured["matmul_flops"] = matmul_flops(device) if attention else None
    return measured


def measure(spec: dict[str, Any], fresh: bool = False) -> dict[str, Any]:
    """What a child process measures: ``spec["mode"]`` "memory" (one row) or "time"; a
    ``fresh`` process (nothing run in it yet) given ``spec["fork_peaks"]`` first measures
    each row's peak memory in a fork of itself, which has imported torch and run nothing:
    what a fresh process per row measures, without its start-up."""
    import torch

    from lit_sparse.kernels import flushed_denormals

    forks = fresh and spec.get("fork_peaks") and spec["mode"] == "time"
    peaks = _row_peaks(spec, spec["plugins"], _in_fork) if forks else None
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    trains_on_cpu = spec["kind"] == "train" and spec["device"] == "cpu"
    # subnormals as zero on every thread while training is timed, as fit runs
    with flushed_denormals() if trains_on_cpu else contextlib.nullcontext():
        if spec["mode"] == "memory":
            return _memory(spec)
        measured = _timing(spec)
    if peaks is not None:
        measured["peaks"] = peaks
    return measured


FORKS_FOR_PEAKS = sys.platform == "linux" and hasattr(os, "fork")
"""Whether a timing process can measure its rows' peaks in forks of itself (Linux: a fork
starts from the parent's peak resident set, its current one, and VmHWM is per process)."""


def _in_fork(spec: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`measure` in a fork of this process (None when it fails)."""
    try:
        return call_in_fork(measure, spec)
    except ChildProcessError as err:
        progress(f"memory: {err}")
        return None


def run_child(spec: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`measure` in a fresh process (None when it fails)."""
    return timing.run_child("lit_sparse_studies.bench.rows", spec)


def _row_peaks(spec: dict[str, Any], plugins: list[str], run) -> dict[str, float | None]:
    """Each row's peak memory (:func:`_memory`), each measured by ``run`` (:func:`_in_fork`
    or :func:`run_child`; None where it fails). Flex rows have none: a compile per process,
    its time is the point, not its memory."""
    peaks: dict[str, float | None] = {}
    for plugin in plugins:
        if is_flex(plugin):
            continue
        progress(f"T={spec['length']} {plugin}: peak memory ...")
        row = run({**spec, "mode": "memory", "plugin": plugin})
        peaks[plugin] = None if row is None else row["peak_mb"]
    return peaks


def length_rows(spec: dict[str, Any], plugins: list[str]) -> list[dict[str, Any]]:
    """Every row at one length: peaks, then the interleaved timing of all of them. On the
    CPU each row's peak memory is measured in a fork of the timing process, or without
    forks in a fresh process of its own; CUDA: the timing process reads the allocator's."""
    length, kind = spec["length"], spec["kind"]
    spec = {**spec, "fork_peaks": spec["device"] == "cpu" and FORKS_FOR_PEAKS}
    processes = spec["device"] == "cpu" and not spec["fork_peaks"]
    peaks = _row_peaks(spec, plugins, run_child) if processes else {}
    progress(f"T={length}: timing {', '.join(plugins)} in interleaved rounds ...")
    measured = run_child({**spec, "mode": "time", "plugins": plugins}) or {}
    peaks.update(measured.get("peaks") or {})
    failed = measured.get("failed") or {}
    floor_ms, traffic = None, floor_bytes(spec) if kind == "attention" else 0
    if measured.get("bandwidth"):
        floor_ms = 1e3 * traffic / measured["bandwidth"]
        progress(
            f"T={length}: copy bandwidth {measured['bandwidth'] / 1e9:.1f} GB/s, "
            f"memory-traffic floor {floor_ms:.3f} ms"
        )
    if measured.get("matmul_flops"):
        progress(f"T={length}: fp32 matmul {measured['matmul_flops'] / 1e9:.1f} GFLOP/s")
    by_load = measured.get("busy") or {}
    idle = by_load.get("0", {})
    info = measured.get("info") or {}
    # a failed plugin has one row saying why (and the command exits with 1)
    rows = [{"T": length, "plugin": p, "ms": None, "error": failed[p]} for p in failed]
    for busy in spec["busy_cores"]:
        timing = by_load.get(str(busy), {})
        dense_ms = timing.get("dense", {}).get("ms")
        for plugin in plugins:
            if plugin not in timing:
                continue
            ms = timing[plugin]["ms"]
            row: dict[str, Any] = {"T": length, "plugin": plugin, "busy_cores": busy, "ms": ms}
            if kind == "train":
                row["tokens_per_s"] = spec["batch"] * length / (ms / 1e3)
            row["speedup_vs_dense"] = None if dense_ms is None else dense_ms / ms
            if kind == "attention":
                row["pass"] = info.get(plugin, {}).get("pass", "fwd+bwd")
                flex = timing.get(flex_peer(plugin), {}).get("ms")
                row["speedup_vs_flex"] = None if flex is None else flex / ms
                if is_flex(plugin):
                    row["block_density"] = info[plugin].get("block_density")
                    row["compile_s"] = max(0.0, info[plugin]["first_s"] - ms / 1e3)
            row["x_idle"] = ms / idle[plugin]["ms"] if plugin in idle else None
            row["peak_mb"] = peaks.get(plugin)
            if row.get("pass") == "fwd":  # dense and the floor are forward + backward
                row["speedup_vs_dense"] = None
            elif floor_ms is not None:
                row.update(floor_ms=floor_ms, x_floor=ms / floor_ms, gb_per_s=traffic / ms / 1e6)
            if kind == "attention" and "keys" in info.get(plugin, {}):
                work = useful_flops(spec, info[plugin]["keys"], row["pass"] == "fwd+bwd")
                row["gflop_s"] = work / ms / 1e6
                peak = measured.get("matmul_flops")
                row["x_peak"] = row["gflop_s"] * 1e9 / peak if peak else None
            rows.append(row)
            _report_row(row, timing[plugin]["runs"])
    return rows


def _report_row(row: dict[str, Any], runs: int) -> None:
    speed, peak = row["speedup_vs_dense"], row["peak_mb"]
    load = f" ({row['busy_cores']} busy)" if row["busy_cores"] else ""
    progress(
        f"T={row['T']} {row['plugin']}{load}: {row['ms']:.1f} ms (median of {runs})"
        + ("" if speed is None else f", x{speed:.2f} vs dense")
        + ("" if peak is None else f", peak {peak:.0f} MB")
    )


def run_lengths(
    specs: list[dict[str, Any]], plugins: list[str], dense_max_length: int
) -> list[dict[str, Any]]:
    """Every row of ``plugins`` at the length of each spec, each length in fresh processes;
    dense is skipped above ``dense_max_length`` (O(T^2))."""
    rows: list[dict[str, Any]] = []
    for spec in specs:
        length = spec["length"]
        here = [p for p in plugins if p != "dense" or length <= dense_max_length]
        if len(here) < len(plugins):
            progress(f"T={length} dense: skipped (above --dense-max-length)")
        rows += length_rows(spec, here)
    return rows


def bench_table(rows: list[dict[str, Any]], kind: str) -> str:
    """The rows as a Markdown table ("-" where a value is missing); the busy cores and the
    ratio to the idle time when any row ran with busy cores."""
    from lit_sparse.io import markdown_table

    flex = any(row.get("block_density") is not None for row in rows)
    passes = {row.get("pass") for row in rows if row.get("pass")}
    per = "ms/step" if kind == "train" else "ms" if len(passes) > 1 else "ms fwd+bwd"
    columns = [("T", "T", "d"), ("plugin", "plugin", "s")]
    if len(passes) > 1:
        columns.append(("pass", "pass", "s"))
    loaded = any(row.get("busy_cores") for row in rows)
    if loaded:
        columns.append(("busy_cores", "busy cores", "d"))
    columns.append(("ms", per, ".1f"))
    if loaded:
        columns.append(("x_idle", "x idle", ".2f"))
    if kind == "train":
        columns.append(("tokens_per_s", "tokens/s", ".0f"))
    columns.append(("speedup_vs_dense", "x dense", ".2f"))
    if flex:
        columns += [("speedup_vs_flex", "x flex", ".2f"), ("block_density", "tiles kept", ".3f")]
        columns.append(("compile_s", "compile s", ".1f"))
    columns.append(("peak_mb", "peak MB", ".0f"))
    if kind == "attention":
        columns += [("gb_per_s", "GB/s", ".1f"), ("x_floor", "x floor", ".2f")]
        columns += [("gflop_s", "GFLOP/s", ".1f"), ("x_peak", "x peak", ".3f")]
    body = [[cell(row, key, fmt) for key, _, fmt in columns] for row in rows]
    align = "".join("l" if fmt == "s" else "r" for _, _, fmt in columns)
    return markdown_table([title for _, title, _ in columns], body, align=align)


if __name__ == "__main__":  # the child process of one measurement
    print(json.dumps(measure(json.loads(sys.argv[1]), fresh=True)))
