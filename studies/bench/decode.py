"""Decoding steps after long contexts, batched, against the memory floor
(``python -m lit_sparse bench decode``).

How it measures:

- the model is the paper's shape by default (16 layers, d_model 512, 8 query and 2 key/value
  heads, vocabulary 32,768, trained at 1024 tokens), random weights, float32 (``--dtype
  bfloat16``: the matrices in bfloat16, activations and sums float32 on the CPU; on CUDA the
  whole model in bfloat16; ``--quantize int8`` adds rows of dtype int8, the matrices in int8
  with float32 scales per output channel, CPU only: :mod:`lit_sparse.generation.quantize`);
- every sparse plugin attends the same number of keys per query: fibonacci's window W plus
  its rungs (19 at W = 8); sliding_window a window of that many keys; bigbird the window W,
  2 global keys and the rest random per 64-query block; ``fibonacci_learned`` is the
  learned schedule at its start (alpha = 1);
- a context of C tokens is not computed: every layer's cache is filled with random keys and
  values for each of the batch's B sequences as if C tokens had been decoded (exactness is
  the tests' job), then B tokens are decoded greedily per step, each step a full model step
  (embedding to logits) for the whole batch;
- every (context, batch) runs in a fresh process, its plugins and dtypes timed in
  interleaved rounds, one step of each per round, so a change in the machine's load hits
  them alike; ``ms_per_step`` is the median, ``tokens_per_s`` B over it, ``speedup_vs_dense``
  dense's median over the row's (same dtype);
- the floor: a step at B = 1 reads every weight once, so it takes at least the weights'
  bytes over the memory bandwidth, measured in the same process with one large copy
  (:func:`lit_sparse_studies.bench.timing.copy_bandwidth`; an int8 row's bytes are its int8 matrices
  and scales); ``x_floor`` is ``ms_per_step`` over that time (at larger B a step is
  compute-bound, and the ratio grows with B);
- a step runs each layer as one compiled call where the kernel takes it (CPU, float32
  activations: ``LanguageModel.new_cache(fused=True)``); ``--reference`` adds a
  ``<plugin>/modules`` row per plugin, the same model and cache stepping through its modules
  (the reference path), and ``x modules`` on each plugin's row, the modules' median over its;
- ``--breakdown``: after the timed rounds, a few more steps through the modules (the fused
  step has no module boundaries to time) with timers on them say where a step's time goes:
  ``proj_ms`` the projections (q, k, v, o and the MLP's three), ``attn_ms`` the attention
  reads (RoPE and the cache: the attention modules less their projections), ``head_ms``
  the output layer (final norm, the vocabulary-wide product and the argmax), ``other_ms``
  the rest (norms, residuals, the MLP's activation, the embedding); ``proj x floor`` and
  ``head x floor``: the projections' and the output layer's time over the floor of their
  own weights' bytes (the share of the step that is weight streaming, and how close to the
  memory's speed it streams);
- ``cache_mb`` is the bytes of every layer's cache buffers (keys and values) after the
  context, as allocated: a ring of the largest distance + 1 rows for Fibonacci and
  sliding-window layers, the whole past for dense and BigBird;
- the RSS check decodes ``rss_tokens`` tokens past a ``rss_context`` context with
  fibonacci (B = 1, float32) in its own process and reports the growth of the peak resident
  set size (VmHWM) after the first ``rss_after`` tokens;
- ``--transformers`` adds transformers' own ``generate`` on the same weights, at batch 1 in
  float32 (:mod:`lit_sparse_studies.bench.decode_transformers`): ``hf_fibonacci`` through
  lit_sparse's cache, ``hf_llama_dense`` and ``hf_mistral_sliding`` through transformers'
  caches. The rounds are then ``ROUND_TOKENS`` tokens of each row in turn (a generate call
  per round), and ``x_lit_sparse`` is a transformers row's median over its lit_sparse row's
  (fibonacci, dense, sliding_window) from the same rounds;
- ``--llama-cpp`` adds llama.cpp (llama-cpp-python) on the dense model's weights as GGUF
  files, ``llama_cpp_f32`` and ``llama_cpp_q8_0`` with its flash attention on and the same
  with it off (``_nofa``), at batch 1 beside the float32 rows, with
  the process's thread count (:mod:`lit_sparse_studies.bench.decode_llama_cpp`): their context is
  computed (a prompt of C random tokens), their floor counts the GGUF's bytes, and
  ``x_lit_sparse`` is their median over dense's (float32) from the same rounds.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from lit_sparse import ConfigError
from lit_sparse.io import markdown_table
from lit_sparse_studies.bench.attention import fibonacci_keys
from lit_sparse_studies.bench.decode_llama_cpp import (
    LLAMA_CPP_ROWS,
    MIN_VOCAB,
    NO_FLASH,
    LlamaCppRow,
)
from lit_sparse_studies.bench.decode_transformers import (
    TRANSFORMERS_ROWS,
    TransformersRow,
    source_plugin,
)
from lit_sparse_studies.bench.shape import ModelShape
from lit_sparse_studies.bench.timing import (
    cell,
    copy_bandwidth,
    interleaved_rounds,
    median,
    peak_rss_mb,
    run_child,
    sync,
)

__all__ = [
    "DTYPES",
    "DecodeBenchSpec",
    "PLUGINS",
    "decode_model",
    "decode_plugin",
    "format_rows",
    "run_decode_bench",
    "step_breakdown",
    "weight_bytes",
]

PLUGINS = ("dense", "fibonacci", "fibonacci_learned", "sliding_window", "bigbird", "hybrid")
CONTEXTS = (1024, 4096, 16384, 65536)
DTYPES = ("float32", "bfloat16")
MODULE = "lit_sparse_studies.bench.decode"  # its child processes run this module
ROUND_TOKENS = 8


@dataclass
class DecodeBenchSpec(ModelShape):
    """What ``bench decode`` measures; the model shape defaults to the paper's."""

    contexts: list[int] = field(default_factory=lambda: list(CONTEXTS))
    plugins: list[str] = field(default_factory=lambda: list(PLUGINS))
    batch: list[int] = field(default_factory=lambda: [1])
    """Sequences decoded together per step, one process per value."""
    dtypes: list[str] = field(default_factory=lambda: ["float32"])
    """The weights' dtypes, timed side by side."""
    quantize: str = "none"
    """int8: also time the model with int8 matrices (rows of dtype int8, beside the dtypes')."""
    tokens: int = 16
    """Timed steps per plugin and context (after 2 warm-up steps)."""
    device: str = "cpu"
    breakdown: bool = False
    """Time the parts of a step (projections, attention reads, output layer) too, through the
    modules."""
    reference: bool = False
    """Also time each plugin through its modules (rows ``<plugin>/modules``), beside the
    compiled layer step."""
    rss_tokens: int = 20000
    """Tokens the RSS check decodes (0: no check)."""
    rss_context: int = 65536
    rss_after: int = 1000
    """The RSS growth counts from this many tokens on."""
    transformers: bool = False
    """Also time transformers' own generate (the ``hf_*`` rows, batch 1, float32; needs the
    ``hf`` extra)."""
    llama_cpp: bool = False
    """Also time llama.cpp on the dense model's GGUF, f32 and q8_0 (the ``llama_cpp_*`` rows,
    batch 1, beside the float32 rows; needs the ``llama-cpp`` extra)."""

    def __post_init__(self):
        unknown = sorted(set(self.plugins) - set(PLUGINS))
        if unknown:
            raise ConfigError(f"plugins: unknown {unknown}; known: {', '.join(PLUGINS)}")
        bad = sorted(set(self.dtypes) - set(DTYPES))
        if bad or not self.dtypes:
            raise ConfigError(f"dtypes={self.dtypes}: expected some of {', '.join(DTYPES)}")
        self.check_shape("tokens")
        if not self.contexts or min(self.contexts) < 1:
            raise ConfigError(f"contexts={self.contexts}: expected positive token counts")
        if not self.batch or min(self.batch) < 1:
            raise ConfigError(f"batch={self.batch}: expected sequence counts >= 1")
        if self.rss_tokens < 0 or (self.rss_tokens and self.rss_after >= self.rss_tokens):
            raise ConfigError(
                f"rss_tokens={self.rss_tokens}, rss_after={self.rss_after}: need 0 (no check) "
                "or rss_tokens > rss_after"
            )
        if self.device not in ("cpu", "cuda"):
            raise ConfigError(f"device={self.device!r}: expected cpu or cuda")
        if self.llama_cpp:
            self._check_llama_cpp()
        from lit_sparse.generation import check_quantize

        if check_quantize(self.quantize) == "int8" and self.device != "cpu":
            raise ConfigError(
                f"quantize='int8' with device={self.device!r}: the int8 kernel runs on the CPU only"
            )

    def _check_llama_cpp(self) -> None:
        if self.device != "cpu":
            raise ConfigError(
                f"llama_cpp with device={self.device!r}: the llama.cpp rows time its CPU build"
            )
        if 1 not in self.batch or "float32" not in self.dtypes:
            raise ConfigError(
                f"llama_cpp with batch={self.batch}, dtypes={self.dtypes}: the llama.cpp rows "
                "run at batch 1 beside the float32 rows; include batch 1 and float32"
            )
        if self.vocab_size < MIN_VOCAB:
            raise ConfigError(
                f"vocab_size={self.vocab_size} with llama_cpp: the GGUF's byte-level "
                f"vocabulary needs at least {MIN_VOCAB} rows"
            )

    @property
    def weight_formats(self) -> list[str]:
        """The rows' dtypes: the ``dtypes``, then int8 where ``quantize`` asks for it."""
        return [*self.dtypes, *(["int8"] if self.quantize == "int8" else [])]


def decode_plugin(name: str, window: int, training_length: int):
    """The plugin ``name`` attending as many keys per query as fibonacci with ``window``."""
    from lit_sparse.attention import build_attention

    keys = fibonacci_keys(window, training_length)
    if name == "fibonacci":
        return build_attention("fibonacci", window=window)
    if name == "fibonacci_learned":
        return build_attention("fibonacci", window=window, schedule="learned")
    if name == "sliding_window":
        return build_attention("sliding_window", window=keys - 1)
    if name == "bigbird":
        return build_attention(
            "bigbird", window=window, n_global=2, n_random=max(0, keys - window - 3)
        )
    if name == "hybrid":  # fibonacci with a dense layer in four (layers 1, 5, ...: any depth)
        return build_attention("hybrid", local_attention=decode_plugin("fibonacci", window,
                               training_length), every=4, first=1)  # fmt: skip
    return build_attention(name)


def decode_model(spec: DecodeBenchSpec, plugin: str, dtype: str = "float32"):
    """The benched model of ``plugin``, in eval mode on ``spec.device``, its weights in
    ``dtype`` (CPU: the matrices only; CUDA: the whole model; int8: the matrices, CPU)."""
    import torch

    from lit_sparse import LanguageModel
    from lit_sparse.generation import bfloat16_weights, decoding_layout, quantize_int8

    config = spec.model_config()
    torch.manual_seed(0)
    attention = decode_plugin(plugin, spec.window, spec.training_length)
    model = LanguageModel(config, attention).eval().to(spec.device)
    if dtype == "bfloat16":
        model = model.to(torch.bfloat16) if spec.device == "cuda" else bfloat16_weights(model)
    elif dtype == "int8":
        model = quantize_int8(model)
    return decoding_layout(model)


def weight_bytes(model) -> int:
    """Bytes one decoding step at batch 1 reads at least: every parameter once (the tied
    embedding is the output layer's matrix), and an int8 model's matrices and scales."""
    from lit_sparse.generation import Int8Weight

    int8 = [m for m in model.modules() if isinstance(m, Int8Weight)]
    stored = [*model.parameters(), *(t for m in int8 for t in (m.weight, m.scale))]
    return sum(t.numel() * t.element_size() for t in stored)


class _Decoder:
    """One model and a cache of ``batch`` sequences at a context, one greedy step at a time."""

    def __init__(self, model, batch: int, context: int, tokens: int, fused: bool = True):
        import torch

        self.model = model
        with torch.inference_mode():
            self.cache = model.new_cache(batch, context + tokens + 1, fused=fused)
            self.cache.fill_random(context)
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=model.norm.weight.device)

    def step(self) -> None:
        import torch

        with torch.inference_mode():
            logits = self.model(self.token, self.cache)
            self.token = logits[:, -1].argmax(dim=-1, keepdim=True)


def step_breakdown(decoder: _Decoder, steps: int = 4) -> dict[str, float]:
    """Milliseconds per step in its parts (see the module doc), from ``steps`` more steps
    with timers on the model's modules."""

    from lit_sparse import Attention, Block, FeedForward, FusedProjection

    model, device = decoder.model, decoder.model.norm.weight.device
    kinds: dict[int, str] = {id(model.embedding): "embed"}
    for module in model.modules():
        if isinstance(module, Block):
            kinds[id(module)] = "block"
        elif isinstance(module, Attention):
            kinds[id(module)] = "attn"
            for proj in (module.q_proj, module.k_proj, module.v_proj, module.o_proj, module.qkv):
                kinds[id(proj)] = "attn_proj"
        elif isinstance(module, FeedForward):
            for proj in (module.gate, module.up, module.down, module.gate_up):
                kinds[id(proj)] = "ffn_proj"
    spent = dict.fromkeys(set(kinds.values()), 0.0)
    starts: dict[int, float] = {}

    def before(module, args):
        sync(device)
        starts[id(module)] = time.perf_counter()

    def after(module, args, out):
        sync(device)
        spent[kinds[id(module)]] += time.perf_counter() - starts.pop(id(module))

    timed = [m for m in model.modules() if id(m) in kinds]
    handles = [m.register_forward_pre_hook(before) for m in timed]
    handles += [m.register_forward_hook(after) for m in timed]
    fused, decoder.cache.fused = decoder.cache.fused, False  # the modules, each timed
    try:
        sync(device)
        start = time.perf_counter()
        for _ in range(steps):
            decoder.step()
        sync(device)
        total = time.perf_counter() - start
    finally:
        decoder.cache.fused = fused
        for handle in handles:
            handle.remove()
    ms = {key: 1e3 * value / steps for key, value in spent.items()}
    total_ms = 1e3 * total / steps
    projections = [m for m in timed if kinds[id(m)] in ("attn_proj", "ffn_proj")]
    projections = [m for m in projections if not isinstance(m, FusedProjection)]  # views
    return {
        "proj_ms": ms["attn_proj"] + ms["ffn_proj"],
        "attn_ms": ms["attn"] - ms["attn_proj"],
        "head_ms": total_ms - ms["block"] - ms["embed"],
        "other_ms": ms["block"] - ms["attn"] - ms["ffn_proj"] + ms["embed"],
        "proj_bytes": sum(weight_bytes(m) for m in projections),
        "head_bytes": weight_bytes(model.embedding),
    }


@contextlib.contextmanager
def _spares_others(key: str, failed: dict[str, str], built: dict[str, Any]):
    """Row ``key``'s failure (out of memory, say) spares the others: its error goes to
    ``failed`` and the row out of ``built``."""
    try:
        yield
    except Exception as error:
        failed[key] = f"{type(error).__name__}: {error}"[:300]
        built.pop(key, None)


def _time_context(spec: DecodeBenchSpec, context: int, batch: int) -> dict[str, Any]:
    """Child process of one context and batch: every plugin's and dtype's cache filled, the
    copy bandwidth, then interleaved rounds (and the breakdown)."""
    import torch

    device = torch.device(spec.device)
    decoders, failed = {}, {}
    hf = spec.transformers and batch == 1 and "float32" in spec.dtypes
    llama = spec.llama_cpp and batch == 1
    rounds = -(-spec.tokens // ROUND_TOKENS) if hf else spec.tokens
    steps_per_round = ROUND_TOKENS if hf else 1
    total = rounds * steps_per_round + 2
    extra = 4 if spec.breakdown else 0  # the breakdown's steps
    for dtype in spec.weight_formats:
        for plugin in spec.plugins:
            key = f"{plugin}|{dtype}"
            with _spares_others(key, failed, decoders):
                model = decode_model(spec, plugin, dtype)
                built = [_Decoder(model, batch, context, total + extra)]
                decoders[key] = built[0]
                if spec.reference:
                    built.append(_Decoder(model, batch, context, total, fused=False))
                    decoders[f"{plugin}/modules|{dtype}"] = built[1]
                for _ in range(2):  # warm-up: allocations, threads, the caches' growth
                    for decoder in built:
                        decoder.step()
    cpp = _llama_cpp_rows(spec, context, decoders, total, failed) if llama else {}
    bandwidth = copy_bandwidth(device)
    rows = _transformers_rows(spec, context, decoders, rounds, failed) if hf else {}
    if rows:
        times = _chunked_rounds({**decoders, **cpp}, rows, rounds)
    else:
        steps = {key: stepper.step for key, stepper in {**decoders, **cpp}.items()}
        times = interleaved_rounds(steps, spec.tokens, device=device)
    result = {}
    for key, ts in times.items():
        if key in rows or key in cpp:
            row = rows.get(key) or cpp[key]
            result[key] = {
                "ms_per_step": 1e3 * median(ts),
                "weight_bytes": row.weight_bytes if key in cpp else weight_bytes(row.network),
                "cache_mb": row.cache_mb,
                "cache": row.describe(),
            }
            continue
        decoder = decoders[key]
        result[key] = {
            "ms_per_step": 1e3 * median(ts),
            "weight_bytes": weight_bytes(decoder.model),
            "cache_mb": decoder.cache.nbytes / 2**20,
            "cache": decoder.cache.describe(),
        }
        if spec.breakdown:
            result[key].update(step_breakdown(decoder))
    return {"failed": failed, "rows": result, "bandwidth": bandwidth}


def _transformers_rows(spec, context, decoders, rounds, failed) -> dict[str, TransformersRow]:
    """The ``hf_*`` rows at ``context`` (keys ``name|float32``), on the weights of their
    lit_sparse rows, warmed up."""
    rows = {}
    for name in TRANSFORMERS_ROWS:
        key, source = f"{name}|float32", f"{source_plugin(name)}|float32"
        with _spares_others(key, failed, rows):
            if source in decoders:
                network = decoders[source].model
            else:
                network = decode_model(spec, source_plugin(name))
            rows[key] = TransformersRow(name, network, context, (rounds + 1) * (ROUND_TOKENS + 1))
            rows[key].network = network
            rows[key].round(3)  # warm-up
    return rows


def _llama_cpp_rows(spec, context, decoders, total: int, failed) -> dict[str, LlamaCppRow]:
    """The ``llama_cpp_*`` rows at ``context`` (keys ``name|float32``) on the dense float32
    row's weights, warmed up: the first evaluates the context as a prompt, the others start
    from a copy of its cache; llama.cpp gets torch's thread count."""
    import torch

    rows, source, states = {}, decoders.get("dense|float32"), {}
    network = None if source is None else source.model
    for name in LLAMA_CPP_ROWS:
        key = f"{name}|float32"
        with _spares_others(key, failed, rows):
            if network is None:
                network = decode_model(spec, "dense")
            threads = torch.get_num_threads()
            flash = not name.endswith(NO_FLASH)
            row = LlamaCppRow(name, network, context, total, threads, states.get(flash))
            rows[key] = row
            if flash not in states:  # the next row of this setting starts from this context
                states[flash] = row.state()
            for _ in range(2):  # warm-up
                rows[key].step()
    return rows


def _chunked_rounds(decoders, rows, rounds: int) -> dict[str, list[float]]:
    """Seconds per token of every row: each round, ``ROUND_TOKENS`` steps of each lit_sparse
    row, then one generate call of ``ROUND_TOKENS + 1`` tokens of each transformers row."""
    times: dict[str, list[float]] = {name: [] for name in (*decoders, *rows)}
    for _ in range(rounds):
        for name, decoder in decoders.items():
            for _ in range(ROUND_TOKENS):
                start = time.perf_counter()
                decoder.step()
                times[name].append(time.perf_counter() - start)
        for name, row in rows.items():
            times[name] += row.round(ROUND_TOKENS + 1)
    return times


def _rss_check(spec: DecodeBenchSpec) -> dict[str, Any]:
    """Child process: fibonacci decodes ``rss_tokens`` tokens past ``rss_context``."""
    decoder = _Decoder(decode_model(spec, "fibonacci"), 1, spec.rss_context, spec.rss_tokens)
    start = time.perf_counter()
    for _ in range(spec.rss_after):
        decoder.step()
    after = peak_rss_mb()
    for _ in range(spec.rss_tokens - spec.rss_after):
        decoder.step()
    seconds = time.perf_counter() - start
    return {
        "check": "rss",
        "plugin": "fibonacci",
        "context": spec.rss_context,
        "tokens": spec.rss_tokens,
        "after": spec.rss_after,
        "rss_after_first_mb": after,
        "rss_end_mb": peak_rss_mb(),
        "rss_growth_mb": peak_rss_mb() - after,
        "ms_per_token": 1e3 * seconds / spec.rss_tokens,
        "cache_mb": decoder.cache.nbytes / 2**20,
    }


def _child(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    spec = DecodeBenchSpec(**job["spec"])
    if spec.threads:
        torch.set_num_threads(spec.threads)
    if job["mode"] == "rss":
        return _rss_check(spec)
    return _time_context(spec, job["context"], job["batch"])


def _row_names(spec: DecodeBenchSpec, batch: int, dtype: str) -> list[str]:
    """The rows of one (batch, dtype): the plugins, and the transformers and llama.cpp rows
    where timed."""
    hf = spec.transformers and batch == 1 and dtype == "float32"
    llama = spec.llama_cpp and batch == 1 and dtype == "float32"
    modules = [f"{plugin}/modules" for plugin in spec.plugins] if spec.reference else []
    return [
        *spec.plugins,
        *modules,
        *(TRANSFORMERS_ROWS if hf else ()),
        *(LLAMA_CPP_ROWS if llama else ()),
    ]


def _rows_of(spec: DecodeBenchSpec, context: int, batch: int, measured: dict) -> list[dict]:
    rows = []
    timing = measured["rows"]
    bandwidth = measured.get("bandwidth")
    for dtype in spec.weight_formats:
        dense = timing.get(f"dense|{dtype}", {}).get("ms_per_step")
        for plugin in _row_names(spec, batch, dtype):
            key = f"{plugin}|{dtype}"
            row: dict[str, Any] = {
                "context": context,
                "batch": batch,
                "dtype": dtype,
                "plugin": plugin,
            }
            if key in measured["failed"]:
                rows.append({**row, "error": measured["failed"][key]})
                continue
            row.update(timing[key])
            ms = row["ms_per_step"]
            row["ms_per_token"] = ms / batch
            row["tokens_per_s"] = batch / (ms / 1e3)
            row["speedup_vs_dense"] = None if dense is None else dense / ms
            if spec.reference and plugin in spec.plugins:
                modules = timing.get(f"{plugin}/modules|{dtype}", {}).get("ms_per_step")
                row["x_modules"] = None if modules is None else modules / ms
            if plugin in TRANSFORMERS_ROWS or plugin in LLAMA_CPP_ROWS:
                source = "dense" if plugin in LLAMA_CPP_ROWS else source_plugin(plugin)
                own = timing.get(f"{source}|{dtype}", {}).get("ms_per_step")
                row["x_lit_sparse"] = None if own is None else ms / own
            if bandwidth:
                row["bandwidth_gb_s"] = bandwidth / 1e9
                row["floor_ms"] = 1e3 * row["weight_bytes"] / bandwidth
                row["x_floor"] = ms / row["floor_ms"]
                for part in ("proj", "head"):  # a part's time over its own weights' floor
                    if row.get(f"{part}_bytes"):
                        floor = 1e3 * row[f"{part}_bytes"] / bandwidth
                        row[f"{part}_x_floor"] = row[f"{part}_ms"] / floor
            rows.append(row)
    return rows


def run_decode_bench(spec: DecodeBenchSpec, progress=print) -> list[dict[str, Any]]:
    """Rows ``context, batch, dtype, plugin, ms_per_step, tokens_per_s, x_floor, cache_mb,
    speedup_vs_dense`` per context, batch, dtype and plugin (``error`` instead where one
    failed; transformers rows add ``x_lit_sparse``), then the RSS check's row."""
    from lit_sparse.interop import require_llama_cpp, require_transformers

    if spec.transformers:
        require_transformers()  # one line naming the extra, before any child starts
    if spec.llama_cpp:
        require_llama_cpp()
    rows: list[dict[str, Any]] = []
    for context in spec.contexts:
        for batch in spec.batch:
            names = ", ".join(_row_names(spec, batch, "float32"))
            progress(f"context {context}, batch {batch}: {names} ...")
            job = {"mode": "time", "context": context, "batch": batch, "spec": asdict(spec)}
            measured = run_child(MODULE, job)
            if measured is None:
                rows += [
                    {"context": context, "batch": batch, "plugin": p, "error": "process failed"}
                    for p in _row_names(spec, batch, "float32")
                ]
                continue
            progress(f"context {context}: copy bandwidth {measured['bandwidth'] / 1e9:.1f} GB/s")
            for row in _rows_of(spec, context, batch, measured):
                rows.append(row)
                if "error" not in row:
                    progress(
                        f"context {context} batch {batch} {row['plugin']} {row['dtype']}: "
                        f"{row['ms_per_step']:.2f} ms/step, {row['tokens_per_s']:.0f} tokens/s, "
                        f"x{row.get('x_floor') or 0:.2f} floor, cache {row['cache_mb']:.1f} MB"
                    )
    if spec.rss_tokens:
        progress(
            f"RSS check: fibonacci, {spec.rss_tokens} tokens past a {spec.rss_context}-token "
            "context ..."
        )
        result = run_child(MODULE, {"mode": "rss", "spec": asdict(spec)})
        rows.append(result or {"check": "rss", "error": "process failed"})
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    """The table of the timing rows, and the RSS check in a sentence."""
    timed = [r for r in rows if "check" not in r]
    dtypes = {r.get("dtype") for r in timed}
    parts = any("proj_ms" in r for r in timed)
    hf = any(r["plugin"] in (*TRANSFORMERS_ROWS, *LLAMA_CPP_ROWS) for r in timed)
    modules = any("x_modules" in r for r in timed)
    header = ["context", "batch"] + (["dtype"] if len(dtypes) > 1 else []) + ["plugin"]
    header += ["ms/step", "tokens/s", "x dense", "x floor"] + (["x lit_sparse"] if hf else [])
    header += ["x modules"] if modules else []
    if parts:
        header += ["proj ms", "attn ms", "head ms", "other ms", "proj x floor", "head x floor"]
    header += ["cache MB", "cache"]
    body = []
    for r in timed:
        line = [str(r["context"]), str(r.get("batch", 1))]
        line += [r.get("dtype", "")] if len(dtypes) > 1 else []
        line += [r["plugin"], cell(r, "ms_per_step", ".2f"), cell(r, "tokens_per_s", ".1f")]
        line += [cell(r, "speedup_vs_dense", ".2f"), cell(r, "x_floor", ".2f")]
        line += [cell(r, "x_lit_sparse", ".2f")] if hf else []
        line += [cell(r, "x_modules", ".2f")] if modules else []
        if parts:
            line += [cell(r, key, ".2f") for key in ("proj_ms", "attn_ms", "head_ms", "other_ms")]
            line += [cell(r, key, ".2f") for key in ("proj_x_floor", "head_x_floor")]
        line += [cell(r, "cache_mb", ".1f"), r.get("cache") or r.get("error", "")]
        body.append(line)
    text = markdown_table(header, body)
    floors = {round(r["floor_ms"], 2) for r in timed if r.get("floor_ms")}
    if floors:
        bandwidths = sorted(r["bandwidth_gb_s"] for r in timed if r.get("bandwidth_gb_s"))
        text += (
            f"\n\nfloor: the weights' bytes over the copy bandwidth measured in each process "
            f"({bandwidths[0]:.1f}-{bandwidths[-1]:.1f} GB/s): "
            + ", ".join(f"{f:.2f}" for f in sorted(floors))
            + " ms"
        )
    for r in rows:
        if r.get("check") == "rss" and "error" not in r:
            text += (
                f"\n\nRSS check ({r['plugin']}): {r['tokens']} tokens past a "
                f"{r['context']}-token context at {r['ms_per_token']:.2f} ms/token; peak RSS "
                f"{r['rss_after_first_mb']:.0f} MB after the first {r['after']} tokens, "
                f"{r['rss_end_mb']:.0f} MB at the end: growth {r['rss_growth_mb']:.1f} MB"
            )
        elif r.get("check") == "rss":
            text += f"\n\nRSS check: {r['error']}"
    return text


if __name__ == "__main__":  # a child process of run_decode_bench
    print(json.dumps(_child(json.loads(sys.argv[1]))))
