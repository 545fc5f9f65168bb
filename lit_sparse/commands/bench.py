"""``python -m lit_sparse bench attention|train|decode``: time the attention op, whole
training steps and decoding against dense, in one run, as Markdown tables (and JSON).

- ``attention``: forward + backward of one attention call (B=1, 8 query heads, 2 KV heads,
  head dim 64 by default) for every registered plugin, built-in or from an installed
  package, in the configurations its ``bench_cases`` hook gives (fibonacci adds
  ``fibonacci_learned``), dense included (causal SDPA, or flash-attn on CUDA in half
  precision when installed: what the model runs); as peers, FlexAttention with each slot
  plugin's block mask (``flex:<plugin>``; forward only on the CPU, where it has no
  backward) and natten's causal neighborhood attention when ``natten_mps`` is installed
  (:mod:`lit_sparse.bench.attention`).
- ``train``: AdamW training steps of the quickstart or the paper's model shape
  (:mod:`lit_sparse.bench.train`).
- ``decode``: decoding steps of the paper's model after contexts of 1k to 64k tokens,
  batched, against the weights' memory floor, with each plugin's KV-cache size
  (:mod:`lit_sparse.bench.decode`); ``--transformers`` adds transformers' own ``generate``
  on the same weights, ``--llama-cpp`` llama.cpp on the dense model's GGUF (f32, q8_0).
- ``prefill``: a long prompt into the caches in chunks, tokens/s and peak memory
  (:mod:`lit_sparse.bench.prefill`).
- ``gpu``: the GPU plan (tests, attention, decoding, training steps) in one command
  (:mod:`lit_sparse.bench.gpu`).

How the rows are measured (fresh processes, interleaved rounds, medians, the copy-bandwidth
floor, busy cores) is in :mod:`lit_sparse.bench.timing` and :mod:`lit_sparse.bench.rows`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from lit_sparse.bench.attention import (
    DTYPES,
    FLEX,
    FLEX_PREFIX,
    LEARNED,
    NATTEN,
    SDPA,
    fibonacci_keys,
    flex_peer,
    is_flex,
    natten_available,
    plugin_names,
    slot_plugin_names,
)
from lit_sparse.bench.rows import bench_table, run_lengths
from lit_sparse.bench.timing import progress
from lit_sparse.bench.train import TRAIN_SHAPES, train_batch
from lit_sparse.commands import command_parser, reports_errors
from lit_sparse.errors import ConfigError
from lit_sparse.parsing.help_text import HelpFormatter

DEFAULT_LENGTHS = (1024, 4096, 16384)


def _bench_rows_of(args: argparse.Namespace) -> list[str]:
    """The rows to time, dense first (the others divide by it), peers last: by default (and
    with ``flex`` among the plugins) a FlexAttention row for every slot plugin listed."""
    kind = args.command
    chosen = list(args.plugins) if args.plugins else plugin_names(args.window)
    flex = kind == "attention" and (args.plugins is None or FLEX in chosen)
    plugins = [p for p in chosen if p != FLEX]
    if "dense" not in plugins:
        plugins.insert(0, "dense")
    plugins.sort(key=lambda p: (p != "dense", is_flex(p)))
    if flex:
        slot_plugins = set(slot_plugin_names(args.window))
        peers = [flex_peer(p) for p in plugins if p in slot_plugins]
        plugins += [p for p in peers if p not in plugins]
    if kind == "attention" and NATTEN not in plugins and args.plugins is None:
        if natten_available():
            plugins.append(NATTEN)
        else:
            progress("natten_mps is not installed: its peer row is skipped")
    return plugins


def _length_spec(args: argparse.Namespace, length: int) -> dict[str, Any]:
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


def _subcommand(sub, name: str, what: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=what, formatter_class=HelpFormatter)


def _parser() -> argparse.ArgumentParser:
    parser = command_parser("bench", __doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    attention = _subcommand(sub, "attention", "one attention call, forward + backward")
    train = _subcommand(sub, "train", "whole AdamW training steps of the quickstart shape")
    for p, window in ((attention, 12), (train, 8)):
        p.add_argument("--lengths", type=int, nargs="+", default=None, help="sequence lengths")
        p.add_argument(
            "--plugins",
            nargs="+",
            default=None,
            help="rows: every registered plugin's bench cases (e.g. fibonacci, "
            f"{LEARNED}, an installed package's plugin), '{NATTEN}', '{SDPA}' (dense on SDPA "
            f"whatever else is installed), '{FLEX}' (FlexAttention with the block mask of each "
            f"slot plugin listed) or '{FLEX_PREFIX}NAME' (one) (default: all, flex rows "
            "included); dense always runs",
        )
        p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to time")
        p.add_argument("--json", type=str, default=None, help="write the rows to this file")
        p.add_argument("--window", type=int, default=window, help="fibonacci window W")
        p.add_argument("--repeats", type=int, default=5, help="timed calls per row (median)")
        p.add_argument("--budget", type=float, default=15.0, help="seconds of timed calls per row")
        p.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
        p.add_argument(
            "--busy-cores",
            type=int,
            nargs="+",
            default=[0],
            help="time every row with this many cores kept busy by spinning processes, one "
            "pass per value (e.g. 0 1: idle and one busy core, 'x idle' their ratio)",
        )
        p.add_argument(
            "--dense-max-length",
            type=int,
            default=16384,
            help="longest length at which dense runs (O(T^2))",
        )
    attention.add_argument("--batch", type=int, default=1, help="sequences per call")
    attention.add_argument(
        "--dtype",
        choices=DTYPES,
        default="float32",
        help="dtype of q, k, v (the CPU kernel computes in float32 whatever it gets)",
    )
    attention.add_argument("--heads", type=int, default=8, help="query heads")
    attention.add_argument("--kv-heads", type=int, default=2, help="key/value heads (GQA)")
    attention.add_argument("--head-dim", type=int, default=64, help="channels per head")
    train.add_argument(
        "--shape",
        choices=tuple(TRAIN_SHAPES),
        default="small",
        help="small: 4 layers, d_model 128 (default); paper: 16 layers, d_model 512, 8/2 heads "
        "of 64, vocabulary 32,768, one sequence per step",
    )
    train.add_argument(
        "--tokens-per-step",
        type=int,
        default=None,
        help="batch = this // T (default: 8192 tokens; --shape paper: one sequence)",
    )
    train.set_defaults(batch=1)
    _decode_parser(sub)
    _prefill_parser(sub)
    _gpu_parser(sub)
    return parser


def _int_options(parser, defaults, helps: dict[str, str]) -> None:
    """An integer option per field of ``helps`` (its help), defaulting to the spec's."""
    for name, what in helps.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=int, default=getattr(defaults, name), dest=name, help=what)


def _shape_options(parser, defaults) -> None:
    """The model-shape options of decode and prefill (default: the paper's shape)."""
    parser.add_argument("--window", type=int, default=defaults.window, help="fibonacci W")
    shape = {
        "n_layers": "decoder layers",
        "d_model": "model width",
        "n_heads": "query heads",
        "n_kv_heads": "key/value heads (GQA)",
        "vocab_size": "vocabulary (the output layer's rows)",
        "training_length": "the length the pattern is built for (Fibonacci rungs below it)",
    }
    _int_options(parser, defaults, shape)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")


def _prefill_parser(sub) -> None:
    from lit_sparse.bench.decode import PLUGINS
    from lit_sparse.bench.prefill import PrefillBenchSpec

    defaults = PrefillBenchSpec()
    prefill = _subcommand(
        sub, "prefill", "a long prompt into the caches, in chunks: tokens/s and peak memory"
    )
    prefill.add_argument(
        "--lengths", type=int, nargs="+", default=defaults.lengths, help="prompt lengths"
    )
    prefill.add_argument(
        "--plugins", nargs="+", choices=PLUGINS, default=defaults.plugins, help="rows"
    )
    prefill.add_argument(
        "--chunk",
        type=int,
        nargs="+",
        default=defaults.chunks,
        dest="chunks",
        help="prompt tokens per chunk, one row each (0: the whole prompt at once)",
    )
    _shape_options(prefill, defaults)
    prefill.add_argument("--json", default=None, help="write the rows to this file")


def _gpu_parser(sub) -> None:
    from lit_sparse.bench.gpu import PLAN

    gpu = sub.add_parser(
        "gpu",
        help="the GPU plan in one command: gpu tests, attention, decoding and training steps "
        "on CUDA (at most 8 minutes); --dry-run checks it on any machine",
    )
    gpu.add_argument("--json", default=None, help="write every step's result and rows here")
    gpu.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and check that every piece imports and builds its inputs (CPU)",
    )
    gpu.add_argument(
        "--steps",
        nargs="+",
        choices=[step.name for step in PLAN],
        default=None,
        help="run only these steps (default: all)",
    )


def _gpu(args: argparse.Namespace) -> int:
    from lit_sparse.bench.gpu import BenchCli, describe, dry_run, plan, run_plan

    steps = plan(args.steps)
    print(describe(steps))
    if args.dry_run:
        found = dry_run(steps, BenchCli(_parser().parse_args, _length_spec), progress)
        for name, why in found.failed.items():
            print(f"{name}: {why}", file=sys.stderr)
        print("dry run: " + ("every piece imports and builds" if not found.failed else "FAILED"))
        return 1 if found.failed else 0
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            "bench gpu: no CUDA device here; `bench gpu --dry-run` checks the plan on any machine"
        )
    if not args.json:
        raise ConfigError("bench gpu: --json PATH is needed (where the results go)")
    result = run_plan(steps, progress)
    from lit_sparse.io.atomic import write_json

    write_json(args.json, result)
    failed = [r["step"] for r in result["steps"] if r["rc"] != 0]
    print(f"{len(steps) - len(failed)} of {len(steps)} steps passed in {result['seconds']:.0f} s")
    return 1 if failed else 0


def _decode_parser(sub) -> None:
    from lit_sparse.bench.decode import CONTEXTS, DTYPES, PLUGINS, DecodeBenchSpec

    defaults = DecodeBenchSpec()
    decode = _subcommand(
        sub,
        "decode",
        "decoding steps after long contexts: batched, against the weights' memory floor",
    )
    decode.add_argument(
        "--contexts",
        type=int,
        nargs="+",
        default=list(CONTEXTS),
        help="tokens already in the cache when the timed steps start",
    )
    decode.add_argument("--plugins", nargs="+", choices=PLUGINS, default=list(PLUGINS), help="rows")
    decode.add_argument(
        "--batch", type=int, nargs="+", default=[1], help="sequences per step (e.g. 1 8 32)"
    )
    decode.add_argument(
        "--dtype",
        nargs="+",
        choices=DTYPES,
        default=["float32"],
        dest="dtypes",
        help="the weights' dtypes, timed side by side (bfloat16: half the bytes per step)",
    )
    decode.add_argument(
        "--quantize",
        default=defaults.quantize,
        help="int8: also time the model with int8 matrices and float32 scales (rows of dtype "
        "int8 beside the --dtype rows; their floor counts the int8 bytes; CPU only)",
    )
    decode.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where to time")
    decode.add_argument(
        "--breakdown",
        action="store_true",
        help="also time a step's parts: projections, attention reads, output layer, rest",
    )
    decode.add_argument("--tokens", type=int, default=defaults.tokens, help="timed per row")
    _shape_options(decode, defaults)
    rss = {
        "rss_tokens": "tokens the RSS check decodes with fibonacci (0: no check)",
        "rss_context": "the RSS check's prompt length",
        "rss_after": "the RSS check measures growth after this many decoded tokens",
    }
    _int_options(decode, defaults, rss)
    decode.add_argument(
        "--transformers",
        action="store_true",
        help="also time transformers' own generate on the same weights: hf_fibonacci through "
        "lit_sparse's cache, hf_llama_dense and hf_mistral_sliding through transformers' "
        "DynamicCache and sliding-window cache (needs the hf extra)",
    )
    decode.add_argument(
        "--llama-cpp",
        action="store_true",
        dest="llama_cpp",
        help="also time llama.cpp (llama-cpp-python) on the dense model's weights as GGUF files: "
        "llama_cpp_f32 and llama_cpp_q8_0 at batch 1, their context computed as a prompt "
        "(needs the llama-cpp extra)",
    )
    decode.add_argument("--json", default=None, help="write the rows to this file")


def _spec_rows(args: argparse.Namespace) -> int:
    """``bench decode`` or ``prefill``: its spec from the options, its rows printed (and
    written to --json)."""
    from lit_sparse.bench import decode, prefill

    spec_class, run, format_rows = {
        "decode": (decode.DecodeBenchSpec, decode.run_decode_bench, decode.format_rows),
        "prefill": (prefill.PrefillBenchSpec, prefill.run_prefill_bench, prefill.format_rows),
    }[args.command]
    options = {k: v for k, v in vars(args).items() if k not in ("command", "json")}
    rows = run(spec_class(**options), progress=progress)
    print(format_rows(rows))
    if args.json:
        from lit_sparse.io.atomic import write_json

        write_json(args.json, rows)
    return 1 if any("error" in row for row in rows) else 0


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.command in ("decode", "prefill"):
        return _spec_rows(args)
    if args.command == "gpu":
        return _gpu(args)
    if args.lengths is None:
        args.lengths = list(DEFAULT_LENGTHS if args.command == "attention" else (1024, 4096))
    for option, values in (("--lengths", args.lengths), ("--repeats", [args.repeats])):
        bad = [v for v in values if v < 1]
        if bad:
            raise ConfigError(f"{option} {bad[0]}: must be an integer >= 1")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    bad = [n for n in args.busy_cores if not 0 <= n < (cores or 1)]
    if bad:
        raise ConfigError(
            f"--busy-cores {bad[0]}: must be in 0..{(cores or 1) - 1} (this process may run on "
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
    specs = [_length_spec(args, length) for length in args.lengths]
    rows = run_lengths(specs, _bench_rows_of(args), args.dense_max_length)
    print(bench_table(rows, args.command))
    if args.json:
        from lit_sparse.io.atomic import write_json

        write_json(args.json, rows)
    errors = [row for row in rows if "error" in row]
    for row in errors:
        print(f"T={row['T']} {row['plugin']} failed: {row['error']}", file=sys.stderr)
    return 0 if rows and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
