"""What ``bench attention|train|decode|prefill`` time, from their parsed options: the rows
(dense first, peers last), one row spec per length, the options' checks, and each run with
its table printed (and written as JSON). ``commands/bench.py`` holds the parser."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lit_sparse import ConfigError
from lit_sparse.io import write_json
from lit_sparse.kernels import usable_cores
from lit_sparse_studies.bench.attention import (
    FLEX,
    NATTEN,
    SDPA,
    fibonacci_keys,
    flex_peer,
    is_flex,
    natten_available,
    op_plugin_names,
    plugin_names,
    slot_plugin_names,
)
from lit_sparse_studies.bench.rows import bench_table, run_lengths
from lit_sparse_studies.bench.timing import progress
from lit_sparse_studies.bench.train import COMPILED, TRAIN_SHAPES, train_batch

__all__ = ["DEFAULT_LENGTHS", "bench_rows", "length_spec", "run_op_bench", "run_spec_bench"]

DEFAULT_LENGTHS = (1024, 4096, 16384)


def bench_rows(args: argparse.Namespace) -> list[str]:
    """The rows to time, dense first (the others divide by it), peers last: by default (and
    with ``flex`` among the plugins) a FlexAttention row for every slot plugin listed."""
    kind = args.command
    # bench attention times one layer's op: a stack's (a hybrid's) is its plugins'
    defaults = op_plugin_names if kind == "attention" else plugin_names
    chosen = list(args.plugins) if args.plugins else defaults(args.window)
    flex = kind == "attention" and (args.plugins is None or FLEX in chosen)
    plugins = [p for p in chosen if p != FLEX]
    if "dense" not in plugins:
        plugins.insert(0, "dense")
    plugins.sort(key=lambda p: (p != "dense", is_flex(p)))
    if flex:
        slot_plugins = set(slot_plugin_names(args.window))
        peers = [flex_peer(p) for p in plugins if p in slot_plugins]
        plugins += [p for p in peers if p not in plugins]
    if kind == "train" and args.compile:  # each plugin eager, then compiled
        plugins = [row for p in plugins for row in (p, p + COMPILED)]
    if kind == "attention" and NATTEN not in plugins and args.plugins is None:
        if natten_available():
            plugins.append(NATTEN)
        else:
            progress("natten_mps is not installed: its peer row is skipped")
    return plugins


def length_spec(args: argparse.Namespace, length: int) -> dict[str, Any]:
    """What a child process needs to measure every row at ``length``."""
    kind = args.command
    return {
        "kind": kind,
        "length": length,
        "device": args.device,
        "window": args.window,
        "keys": fibonacci_keys(args.window, length),
        "dtype": getattr(args, "dtype", "float32"),
        "batch": args.batch
        if kind == "attention"
        else train_batch(args.tokens_per_step, args.shape, length),
        "shape": getattr(args, "shape", None),
        "heads": getattr(args, "heads", 8),
        "kv_heads": getattr(args, "kv_heads", 2),
        "dim": getattr(args, "head_dim", 64),
        "repeats": args.repeats,
        "budget": args.budget,
        "threads": args.threads,
        "busy_cores": sorted(set(args.busy_cores)),
    }


def run_op_bench(args: argparse.Namespace) -> int:
    """``bench attention`` or ``train``: the options checked, every row timed at every
    length, the table printed (and written to --json); 1 when a row failed, 2 for options
    that cannot run."""
    if args.lengths is None:
        study = TRAIN_SHAPES.get(getattr(args, "shape", None), {}).get("length")
        defaults = DEFAULT_LENGTHS if args.command == "attention" else (1024, 4096)
        args.lengths = [study] if study else list(defaults)
    for option, values in (("--lengths", args.lengths), ("--repeats", [args.repeats])):
        bad = [v for v in values if v < 1]
        if bad:
            raise ConfigError(f"{option} {bad[0]}: must be an integer >= 1")
    cores = usable_cores()
    bad = [n for n in args.busy_cores if not 0 <= n < cores]
    if bad:
        raise ConfigError(
            f"--busy-cores {bad[0]}: must be in 0..{cores - 1} (this process may run on "
            f"{cores} cores; keeping all of them busy would leave none for the bench)"
        )
    known = {*plugin_names(args.window), NATTEN, FLEX, SDPA}
    known |= {flex_peer(p) for p in slot_plugin_names(args.window)}
    unknown = sorted(set(args.plugins or ()) - known)
    if unknown:
        print(f"unknown plugins {unknown}; known: {sorted(known)}", file=sys.stderr)
        return 2
    if args.command == "attention" and (args.kv_heads < 1 or args.heads % args.kv_heads):
        print(
            f"--heads {args.heads} must be a multiple of --kv-heads {args.kv_heads} (GQA groups)",
            file=sys.stderr,
        )
        return 2
    flexes = [p for p in args.plugins or () if p == FLEX or is_flex(p)]
    if flexes and args.command != "attention":
        raise ConfigError(
            f"--plugins {flexes[0]}: FlexAttention rows are timed by `bench attention` only "
            "(one attention call), not by `bench train`"
        )
    specs = [length_spec(args, length) for length in args.lengths]
    rows = run_lengths(specs, bench_rows(args), args.dense_max_length)
    print(bench_table(rows, args.command))
    if args.json:
        write_json(args.json, rows)
    errors = [row for row in rows if "error" in row]
    for row in errors:
        print(f"T={row['T']} {row['plugin']} failed: {row['error']}", file=sys.stderr)
    return 0 if rows and not errors else 1


def run_spec_bench(args: argparse.Namespace) -> int:
    """``bench decode`` or ``prefill``: its spec from the options, its rows printed (and
    written to --json)."""
    from lit_sparse_studies.bench import decode, prefill

    spec_class, run, format_rows = {
        "decode": (decode.DecodeBenchSpec, decode.run_decode_bench, decode.format_rows),
        "prefill": (prefill.PrefillBenchSpec, prefill.run_prefill_bench, prefill.format_rows),
    }[args.command]
    options = {k: v for k, v in vars(args).items() if k not in ("command", "json")}
    rows = run(spec_class(**options), progress=progress)
    print(format_rows(rows))
    if args.json:
        write_json(args.json, rows)
    return 1 if any("error" in row for row in rows) else 0
