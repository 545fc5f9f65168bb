"""Per-token decoding latency and KV-cache size after long contexts
(``python -m lit_sparse bench decode``).

How it measures:

- the model is the paper's shape by default (16 layers, d_model 512, 8 query and 2 key/value
  heads, vocabulary 32,768, trained at 1024 tokens), random weights, fp32, batch 1;
- every sparse plugin attends the same number of keys per query: fibonacci's window W plus
  its rungs (19 at W = 8); sliding_window a window of that many keys; bigbird the window W,
  2 global keys and the rest random per 64-query block; ``fibonacci_learned`` is the
  learned schedule at its start (alpha = 1);
- a context of C tokens is not computed: every layer's cache is filled with random keys and
  values as if C tokens had been decoded (exactness is the tests' job), then tokens are
  decoded greedily from there, each one a full model step (embedding to logits);
- all plugins of one context run in one fresh process and are timed in interleaved rounds,
  one token of each per round, so a change in the machine's load hits them alike;
  ``ms_per_token`` is the median, ``speedup_vs_dense`` dense's median over the row's;
- ``cache_mb`` is the bytes of every layer's cache buffers (keys and values) after the
  context, as allocated: a ring of the largest distance + 1 rows for Fibonacci and
  sliding-window layers, the whole past for dense and BigBird;
- the RSS check decodes ``rss_tokens`` tokens past a ``rss_context`` context with
  fibonacci in its own process and reports the growth of the peak resident set size
  (``ru_maxrss``) after the first ``rss_after`` tokens;
- ``--transformers`` adds transformers' own ``generate`` on the same weights
  (:mod:`lit_sparse.bench.decode_transformers`): ``hf_fibonacci`` through lit_sparse's cache,
  ``hf_llama_dense`` and ``hf_mistral_sliding`` through transformers' caches. The rounds are
  then ``ROUND_TOKENS`` tokens of each row in turn (a generate call per round), and
  ``x_lit_sparse`` is a transformers row's median over its lit_sparse row's (fibonacci,
  dense, sliding_window) from the same rounds.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from lit_sparse.bench.decode_transformers import TRANSFORMERS_ROWS, TransformersRow, source_plugin
from lit_sparse.bench.timing import interleaved_rounds, median, peak_rss_mb, run_child
from lit_sparse.errors import ConfigError
from lit_sparse.io.tables import markdown_table

__all__ = ["DecodeBenchSpec", "PLUGINS", "decode_plugin", "format_rows", "run_decode_bench"]

PLUGINS = ("dense", "fibonacci", "fibonacci_learned", "sliding_window", "bigbird")
CONTEXTS = (1024, 4096, 16384, 65536)
MODULE = "lit_sparse.bench.decode"  # its child processes run this module
ROUND_TOKENS = 8


@dataclass
class DecodeBenchSpec:
    """What ``bench decode`` measures; the model shape defaults to the paper's."""

    contexts: list[int] = field(default_factory=lambda: list(CONTEXTS))
    plugins: list[str] = field(default_factory=lambda: list(PLUGINS))
    tokens: int = 16
    """Timed tokens per plugin and context (after 2 warm-up tokens)."""
    window: int = 8
    n_layers: int = 16
    d_model: int = 512
    n_heads: int = 8
    n_kv_heads: int = 2
    vocab_size: int = 32768
    training_length: int = 1024
    threads: int | None = None
    rss_tokens: int = 20000
    """Tokens the RSS check decodes (0: no check)."""
    rss_context: int = 65536
    rss_after: int = 1000
    """The RSS growth counts from this many tokens on."""
    transformers: bool = False
    """Also time transformers' own generate (the ``hf_*`` rows; needs the ``hf`` extra)."""

    def __post_init__(self):
        unknown = sorted(set(self.plugins) - set(PLUGINS))
        if unknown:
            raise ConfigError(f"plugins: unknown {unknown}; known: {', '.join(PLUGINS)}")
        for name in ("tokens", "window", "n_layers", "d_model", "n_heads", "n_kv_heads"):
            value = getattr(self, name)
            if value < (0 if name == "window" else 1):
                raise ConfigError(f"{name}={value}: must be >= {0 if name == 'window' else 1}")
        if not self.contexts or min(self.contexts) < 1:
            raise ConfigError(f"contexts={self.contexts}: expected positive token counts")
        if self.n_heads % self.n_kv_heads or self.d_model % self.n_heads:
            raise ConfigError(
                f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads} "
                f"and divide d_model={self.d_model}"
            )
        if self.rss_tokens < 0 or (self.rss_tokens and self.rss_after >= self.rss_tokens):
            raise ConfigError(
                f"rss_tokens={self.rss_tokens}, rss_after={self.rss_after}: need 0 (no check) "
                "or rss_tokens > rss_after"
            )


def decode_plugin(name: str, window: int, training_length: int):
    """The plugin ``name`` attending as many keys per query as fibonacci with ``window``."""
    from lit_sparse import build_attention
    from lit_sparse.attention import offsets

    keys = len(offsets.layer_distances(1.0, offsets.fibonacci_rungs(15), window, training_length))
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
    return build_attention(name)


def _model(spec: DecodeBenchSpec, plugin: str):
    import torch

    from lit_sparse import LanguageModel, ModelConfig

    config = ModelConfig(
        vocab_size=spec.vocab_size,
        context_length=spec.training_length,
        n_layers=spec.n_layers,
        d_model=spec.d_model,
        n_heads=spec.n_heads,
        n_kv_heads=spec.n_kv_heads,
        head_dim=spec.d_model // spec.n_heads,
    )
    torch.manual_seed(0)
    return LanguageModel(config, decode_plugin(plugin, spec.window, spec.training_length)).eval()


class _Decoder:
    """One plugin's model and cache at a context, stepping one greedy token at a time."""

    def __init__(self, spec: DecodeBenchSpec, plugin: str, context: int, tokens: int):
        import torch

        self.model = _model(spec, plugin)
        with torch.inference_mode():
            self.cache = self.model.new_cache(1, context + tokens + 1)
            self.cache.fill_random(context)
        self.token = torch.zeros(1, 1, dtype=torch.long)

    def step(self) -> None:
        import torch

        with torch.inference_mode():
            logits = self.model(self.token, self.cache)
            self.token = logits[:, -1].argmax(dim=-1, keepdim=True)


def _time_context(spec: DecodeBenchSpec, context: int) -> dict[str, Any]:
    """Child process of one context: every plugin's cache filled, then interleaved rounds."""
    decoders, failed = {}, {}
    rounds = -(-spec.tokens // ROUND_TOKENS) if spec.transformers else spec.tokens
    per_round = ROUND_TOKENS if spec.transformers else 1
    for plugin in spec.plugins:
        try:
            decoders[plugin] = _Decoder(spec, plugin, context, rounds * per_round + 2)
            for _ in range(2):  # warm-up: allocations, threads
                decoders[plugin].step()
        except Exception as error:  # one plugin's failure (memory) spares the others
            failed[plugin] = f"{type(error).__name__}: {error}"[:300]
        if plugin in failed:
            decoders.pop(plugin, None)
    rows = _transformers_rows(spec, context, decoders, rounds, failed)
    if rows:
        times = _chunked_rounds(decoders, rows, rounds)
    else:
        steps = {plugin: decoder.step for plugin, decoder in decoders.items()}
        times = interleaved_rounds(steps, spec.tokens)
    timed = {}
    for name, ts in times.items():
        cache = rows[name] if name in rows else decoders[name].cache
        describe = cache.describe() if name in rows else cache.layers[0].describe()
        nbytes = rows[name].cache_mb if name in rows else cache.nbytes / 2**20
        timed[name] = {"ms_per_token": 1e3 * median(ts), "cache_mb": nbytes, "cache": describe}
    return {"failed": failed, "plugins": timed}


def _transformers_rows(spec, context, decoders, rounds, failed) -> dict[str, TransformersRow]:
    """The ``hf_*`` rows at ``context``, on the weights of their lit_sparse rows, warmed up."""
    rows = {}
    if not spec.transformers:
        return rows
    for name in TRANSFORMERS_ROWS:
        source = source_plugin(name)
        try:
            network = decoders[source].model if source in decoders else _model(spec, source)
            rows[name] = TransformersRow(name, network, context, (rounds + 1) * (ROUND_TOKENS + 1))
            rows[name].round(3)  # warm-up
        except Exception as error:  # one row's failure (memory) spares the others
            failed[name] = f"{type(error).__name__}: {error}"[:300]
        if name in failed:
            rows.pop(name, None)
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
    decoder = _Decoder(spec, "fibonacci", spec.rss_context, spec.rss_tokens)
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
    return _rss_check(spec) if job["mode"] == "rss" else _time_context(spec, job["context"])


def run_decode_bench(spec: DecodeBenchSpec, progress=print) -> list[dict[str, Any]]:
    """Rows ``context, plugin, ms_per_token, cache_mb, speedup_vs_dense`` per context and
    plugin (``error`` instead where a plugin failed; transformers rows add
    ``x_lit_sparse``), then the RSS check's row."""
    names = list(spec.plugins)
    if spec.transformers:
        from lit_sparse.interop.extras import require_transformers

        require_transformers()  # one line naming the extra, before any child starts
        names += TRANSFORMERS_ROWS
    rows: list[dict[str, Any]] = []
    for context in spec.contexts:
        progress(f"context {context}: {', '.join(names)} ...")
        measured = run_child(
            "lit_sparse.bench.decode", {"mode": "time", "context": context, "spec": asdict(spec)}
        )
        if measured is None:
            rows += [{"context": context, "plugin": p, "error": "process failed"} for p in names]
            continue
        timing = measured["plugins"]
        dense = timing.get("dense", {}).get("ms_per_token")
        for plugin in names:
            if plugin in measured["failed"]:
                rows.append(
                    {"context": context, "plugin": plugin, "error": measured["failed"][plugin]}
                )
                continue
            row = {"context": context, "plugin": plugin, **timing[plugin]}
            row["speedup_vs_dense"] = None if dense is None else dense / row["ms_per_token"]
            if plugin in TRANSFORMERS_ROWS:
                own = timing.get(source_plugin(plugin), {}).get("ms_per_token")
                row["x_lit_sparse"] = None if own is None else row["ms_per_token"] / own
            rows.append(row)
            progress(
                f"context {context} {plugin}: {row['ms_per_token']:.2f} ms/token, "
                f"cache {row['cache_mb']:.1f} MB ({row['cache']})"
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

    def cell(row, key, fmt):
        value = row.get(key)
        return "-" if value is None else format(value, fmt)

    timed = [r for r in rows if "check" not in r]
    hf = any(r["plugin"] in TRANSFORMERS_ROWS for r in timed)
    body = [
        [
            str(r["context"]),
            r["plugin"],
            cell(r, "ms_per_token", ".2f"),
            cell(r, "speedup_vs_dense", ".2f"),
            *([cell(r, "x_lit_sparse", ".2f")] if hf else []),
            cell(r, "cache_mb", ".1f"),
            r.get("cache") or r.get("error", ""),
        ]
        for r in timed
    ]
    header = ["context", "plugin", "ms/token", "x dense", "cache MB", "cache"]
    if hf:
        header.insert(4, "x lit_sparse")
    text = markdown_table(header, body)
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
