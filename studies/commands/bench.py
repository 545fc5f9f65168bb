"""``python -m lit_sparse bench attention|train|decode``: time the attention op, whole
training steps and decoding against dense, in one run, as Markdown tables (and JSON).

- ``attention``: forward + backward of one attention call (B=1, 8 query heads, 2 KV heads,
  head dim 64 by default) for every registered plugin, built-in or from an installed
  package, in the configurations its ``bench_cases`` hook gives (fibonacci adds
  ``fibonacci_learned``), dense included (causal SDPA, or flash-attn on CUDA in half
  precision when installed: what the model runs); as peers, FlexAttention with each slot
  plugin's block mask (``flex:<plugin>``; forward only on the CPU, where it has no
  backward) and natten's causal neighborhood attention when ``natten_mps`` is installed
  (:mod:`lit_sparse_studies.bench.attention`).
- ``train``: AdamW training steps of the quickstart or the paper's model shape
  (:mod:`lit_sparse_studies.bench.train`).
- ``decode``: decoding steps of the paper's model after contexts of 1k to 64k tokens,
  batched, against the weights' memory floor, with each plugin's KV-cache size
  (:mod:`lit_sparse_studies.bench.decode`); ``--transformers`` adds transformers' own ``generate``
  on the same weights, ``--llama-cpp`` llama.cpp on the dense model's GGUF (f32, q8_0).
- ``prefill``: a long prompt into the caches in chunks, tokens/s and peak memory
  (:mod:`lit_sparse_studies.bench.prefill`).
- ``gpu``: the GPU plan (tests, attention, decoding, training steps) in one command
  (:mod:`lit_sparse_studies.bench.gpu`).

How the rows are measured (fresh processes, interleaved rounds, medians, the copy-bandwidth
floor, busy cores) is in :mod:`lit_sparse_studies.bench.timing` and
:mod:`lit_sparse_studies.bench.rows`.
"""

from __future__ import annotations

import argparse
import sys

from lit_sparse.commands import add_print_config, argparse_parser, parse_options, reports_errors
from lit_sparse.parsing.help_text import HelpFormatter
from lit_sparse_studies.bench import plan
from lit_sparse_studies.bench.attention import DTYPES, FLEX, FLEX_PREFIX, LEARNED, NATTEN, SDPA
from lit_sparse_studies.bench.train import COMPILED, TRAIN_SHAPES


def _subcommand(sub, name: str, what: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=what, formatter_class=HelpFormatter)
    add_print_config(parser)
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse_parser("bench", __doc__.split("\n\n")[0])
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
        "of 64, vocabulary 32,768, one sequence per step; mqar128, distance, far_mqar: the "
        "recall study's steps (attention alone, one head, the loss at the asked positions; "
        "each at its own T and batch: the default --lengths)",
    )
    train.add_argument(
        "--compile",
        action="store_true",
        help="also time each plugin with its network's forward through torch.compile "
        f"(rows '<plugin>{COMPILED}'; fit's --model.compile; the compiling call is not timed)",
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
    from lit_sparse_studies.bench.decode import PLUGINS
    from lit_sparse_studies.bench.prefill import PrefillBenchSpec

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
    from lit_sparse_studies.bench.gpu import PLAN

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


def _decode_parser(sub) -> None:
    from lit_sparse_studies.bench.decode import CONTEXTS, DTYPES, PLUGINS, DecodeBenchSpec

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


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args = parse_options(_parser(), argv)
    if args.command in ("decode", "prefill"):
        return plan.run_spec_bench(args)
    if args.command == "gpu":
        from lit_sparse_studies.bench import gpu

        return gpu.run_command(
            args, gpu.BenchCli(lambda argv: parse_options(_parser(), argv), plan.length_spec)
        )
    return plan.run_op_bench(args)


if __name__ == "__main__":
    sys.exit(main())
