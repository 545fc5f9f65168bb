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
from typing import Literal

from lit_sparse.commands import command, parse_command
from lit_sparse_studies.bench import plan
from lit_sparse_studies.bench.attention import FLEX, FLEX_PREFIX, LEARNED, NATTEN, SDPA
from lit_sparse_studies.bench.decode import CONTEXTS, PLUGINS, DecodeBenchSpec
from lit_sparse_studies.bench.prefill import PrefillBenchSpec
from lit_sparse_studies.bench.train import TRAIN_SHAPES

__all__ = ["Bench", "bench_args", "main"]

_DECODE, _PREFILL = DecodeBenchSpec(), PrefillBenchSpec()
Shape = Literal[tuple(TRAIN_SHAPES)]  # type: ignore[valid-type]
_PLUGINS_HELP = (
    "rows: every registered plugin's bench cases (e.g. fibonacci, "
    f"{LEARNED}, an installed package's plugin), '{NATTEN}', '{SDPA}' (dense on SDPA whatever "
    f"else is installed), '{FLEX}' (FlexAttention with the block mask of each slot plugin "
    f"listed) or '{FLEX_PREFIX}NAME' (one) (default: all, flex rows included); dense always runs"
)
_RENAMED = {"decode": {"dtype": "dtypes"}, "prefill": {"chunk": "chunks"}}


def bench_args(subcommand: str, options: dict) -> argparse.Namespace:
    """A subcommand's options as the bench library reads them (``args.command`` and all)."""
    renamed = _RENAMED.get(subcommand, {})
    values = {renamed.get(key, key): value for key, value in options.items()}
    if subcommand == "train":
        values["batch"] = 1
    return argparse.Namespace(command=subcommand, **values)


def parse_bench(argv: list[str]) -> argparse.Namespace:
    """``bench``'s command line (``attention --lengths 4096 ...``) as :func:`bench_args`."""
    subcommand, options = parse_command("bench", argv)
    return bench_args(subcommand, options)


@command("bench")
class Bench:
    """Time the attention op, whole training steps and decoding against dense."""

    def attention(
        self,
        lengths: list[int] | None = None,
        plugins: list[str] | None = None,
        device: Literal["cpu", "cuda"] = "cpu",
        json: str | None = None,
        window: int = 12,
        repeats: int = 5,
        budget: float = 15.0,
        threads: int | None = None,
        busy_cores: list[int] = [0],  # noqa: B006 (never changed)
        dense_max_length: int = 16384,
        batch: int = 1,
        dtype: Literal["float32", "bfloat16", "float16"] = "float32",
        heads: int = 8,
        kv_heads: int = 2,
        head_dim: int = 64,
    ) -> int:
        """One attention call, forward + backward.

        Args:
            lengths: sequence lengths
            plugins: the rows (default: every registered plugin in its bench cases,
                fibonacci_learned too, and dense): plugin names, sdpa (dense on SDPA
                whatever is installed), flex (a FlexAttention row per slot plugin) or
                flex:<plugin> (forward only on the CPU), natten when installed
            device: where to time
            json: write the rows to this file
            window: fibonacci window W
            repeats: timed calls per row (median)
            budget: seconds of timed calls per row
            threads: torch threads (default: all)
            busy_cores: time every row with this many cores kept busy by spinning processes,
                one pass per value (e.g. 0 1: idle and one busy core, 'x idle' their ratio)
            dense_max_length: longest length at which dense runs (O(T^2))
            batch: sequences per call
            dtype: dtype of q, k, v (the CPU kernel computes in float32 whatever it gets)
            heads: query heads
            kv_heads: key/value heads (GQA)
            head_dim: channels per head
        """
        return plan.run_op_bench(bench_args("attention", _options(locals())))

    def train(
        self,
        lengths: list[int] | None = None,
        plugins: list[str] | None = None,
        device: Literal["cpu", "cuda"] = "cpu",
        json: str | None = None,
        window: int = 8,
        repeats: int = 5,
        budget: float = 15.0,
        threads: int | None = None,
        busy_cores: list[int] = [0],  # noqa: B006 (never changed)
        dense_max_length: int = 16384,
        shape: Shape = "small",
        compile: bool = False,
        tokens_per_step: int | None = None,
    ) -> int:
        """Whole AdamW training steps of the quickstart shape.

        Args:
            lengths: sequence lengths
            plugins: the rows (as bench attention's)
            device: where to time
            json: write the rows to this file
            window: fibonacci window W
            repeats: timed calls per row (median)
            budget: seconds of timed calls per row
            threads: torch threads (default: all)
            busy_cores: time every row with this many cores kept busy by spinning processes,
                one pass per value
            dense_max_length: longest length at which dense runs (O(T^2))
            shape: small: 4 layers, d_model 128 (default); paper: 16 layers, d_model 512, 8/2
                heads of 64, vocabulary 32,768, one sequence per step; mqar128, distance,
                far_mqar: the recall study's steps (attention alone, one head, the loss at the
                asked positions; each at its own T and batch: the default --lengths)
            compile: also time each plugin with its network's forward through torch.compile
                (rows '<plugin>+compile'; fit's --model.compile; the compiling call is not timed)
            tokens_per_step: batch = this // T (default: 8192 tokens; --shape paper: one
                sequence)
        """
        return plan.run_op_bench(bench_args("train", _options(locals())))

    def decode(
        self,
        contexts: list[int] = list(CONTEXTS),  # noqa: B006, B008 (never changed)
        plugins: list[str] = list(PLUGINS),  # noqa: B006, B008
        batch: list[int] = [1],  # noqa: B006
        dtype: list[Literal["float32", "bfloat16"]] = ["float32"],  # noqa: B006
        quantize: str = _DECODE.quantize,
        device: Literal["cpu", "cuda"] = "cpu",
        breakdown: bool = False,
        reference: bool = False,
        tokens: int = _DECODE.tokens,
        window: int = _DECODE.window,
        n_layers: int = _DECODE.n_layers,
        d_model: int = _DECODE.d_model,
        n_heads: int = _DECODE.n_heads,
        n_kv_heads: int = _DECODE.n_kv_heads,
        vocab_size: int = _DECODE.vocab_size,
        training_length: int = _DECODE.training_length,
        threads: int | None = None,
        rss_tokens: int = _DECODE.rss_tokens,
        rss_context: int = _DECODE.rss_context,
        rss_after: int = _DECODE.rss_after,
        transformers: bool = False,
        llama_cpp: bool = False,
        json: str | None = None,
    ) -> int:
        """Decoding steps after long contexts: batched, against the weights' memory floor.

        Args:
            contexts: tokens already in the cache when the timed steps start
            plugins: rows (dense, fibonacci, fibonacci_learned, sliding_window, bigbird, hybrid)
            batch: sequences per step (e.g. 1 8 32)
            dtype: the weights' dtypes, timed side by side (bfloat16: half the bytes per step)
            quantize: int8: also time the model with int8 matrices and float32 scales (rows of
                dtype int8 beside the --dtype rows; their floor counts the int8 bytes; CPU only)
            device: where to time
            breakdown: also time a step's parts: projections, attention reads, output layer, rest
                (through the modules: the compiled layer step has no parts to time)
            reference: also time each plugin through its modules (rows <plugin>/modules, the
                reference path) beside its compiled layer step; x modules: their ratio
            tokens: timed per row
            window: fibonacci W
            n_layers: decoder layers
            d_model: model width
            n_heads: query heads
            n_kv_heads: key/value heads (GQA)
            vocab_size: vocabulary (the output layer's rows)
            training_length: the length the pattern is built for (Fibonacci rungs below it)
            threads: torch threads (default: all)
            rss_tokens: tokens the RSS check decodes with fibonacci (0: no check)
            rss_context: the RSS check's prompt length
            rss_after: the RSS check measures growth after this many decoded tokens
            transformers: also time transformers' own generate on the same weights:
                hf_fibonacci through lit_sparse's cache, hf_llama_dense and hf_mistral_sliding
                through transformers' DynamicCache and sliding-window cache (needs the hf extra)
            llama_cpp: also time llama.cpp (llama-cpp-python) on the dense model's weights as
                GGUF files: llama_cpp_f32 and llama_cpp_q8_0 at batch 1, with llama.cpp's flash
                attention on and off (rows *_nofa), their context computed
                as a prompt (needs the llama-cpp extra)
            json: write the rows to this file
        """
        return plan.run_spec_bench(bench_args("decode", _options(locals())))

    def prefill(
        self,
        lengths: list[int] = _PREFILL.lengths,
        plugins: list[str] = _PREFILL.plugins,
        chunk: list[int] = _PREFILL.chunks,
        window: int = _PREFILL.window,
        n_layers: int = _PREFILL.n_layers,
        d_model: int = _PREFILL.d_model,
        n_heads: int = _PREFILL.n_heads,
        n_kv_heads: int = _PREFILL.n_kv_heads,
        vocab_size: int = _PREFILL.vocab_size,
        training_length: int = _PREFILL.training_length,
        threads: int | None = None,
        json: str | None = None,
    ) -> int:
        """A long prompt into the caches, in chunks: tokens/s and peak memory.

        Args:
            lengths: prompt lengths
            plugins: rows
            chunk: prompt tokens per chunk, one row each (0: the whole prompt at once)
            window: fibonacci W
            n_layers: decoder layers
            d_model: model width
            n_heads: query heads
            n_kv_heads: key/value heads (GQA)
            vocab_size: vocabulary (the output layer's rows)
            training_length: the length the pattern is built for (Fibonacci rungs below it)
            threads: torch threads (default: all)
            json: write the rows to this file
        """
        return plan.run_spec_bench(bench_args("prefill", _options(locals())))

    def gpu(
        self, json: str | None = None, dry_run: bool = False, steps: list[str] | None = None
    ) -> int:
        """The GPU plan in one command: gpu tests, attention, decoding and training steps on
        CUDA (at most 8 minutes); --dry-run checks it on any machine.

        Args:
            json: write every step's result and rows here
            dry_run: print the plan and check that every piece imports and builds its inputs
                (CPU)
            steps: run only these steps (default: all)
        """
        from lit_sparse_studies.bench import gpu

        args = argparse.Namespace(json=json, dry_run=dry_run, steps=steps)
        if steps and (unknown := sorted(set(steps) - {step.name for step in gpu.PLAN})):
            from lit_sparse import ConfigError

            known = ", ".join(step.name for step in gpu.PLAN)
            raise ConfigError(f"--steps {unknown[0]}: no step of the plan; {known}")
        return gpu.run_command(args, gpu.BenchCli(parse_bench, plan.length_spec))


def _options(values: dict) -> dict:
    return {key: value for key, value in values.items() if key != "self"}


main = Bench  # the entry point's target
