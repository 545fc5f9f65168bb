"""Benchmarks of the attention op and of whole training steps, against dense SDPA.

``python -m lit_sparse bench decode`` (``lit_sparse.generation.decode_bench``, whose
docstring says how it measures) times one decoding step of the paper's model after
contexts of 1k to 64k tokens and reports each plugin's KV-cache size.

``python -m lit_sparse bench attention`` times forward + backward of one attention call
(B=1, 8 query heads, 2 KV heads, head dim 64 by default) for every registered plugin,
built-in or from an installed package, in the configurations its ``bench_cases`` hook gives
(fibonacci adds ``fibonacci_learned``, the learned-alpha schedule), dense included (causal
``F.scaled_dot_product_attention``, or flash-attn on CUDA in half precision when it is
installed: what the model runs); when ``natten_mps`` is installed, its causal 1-D
neighborhood attention runs as a peer with the same number of keys per query, and on CUDA
FlexAttention runs as a peer (``flex``) with fibonacci's mask. ``python -m lit_sparse bench
train`` times AdamW training steps of the quickstart model shape. Both print a Markdown
table and can write the rows as JSON.

How it measures:

- every sparse plugin is configured with the same keys per query (its ``bench_cases``
  hook gets them): fibonacci's window W plus its rungs; sliding_window a window of that
  many keys; bigbird the window W plus 2 global and (keys - W - 3) random keys per block;
  natten a kernel of that many keys;
- inputs are laid out as the model hands them to attention: (B, T, heads, D) tensors
  viewed as (B, heads, T, D); dense and sparse get the same tensors;
- ``peak_mb``: on the CPU each row runs once more in a fresh Python process: a small
  warm-up call, then one full-size call; the row's value is that call's rise in peak
  resident memory (``ru_maxrss``) over the inputs. On CUDA the allocator counts exactly, so
  the timing process reads it around each plugin's first full-size call
  (``torch.cuda.max_memory_allocated``) and no extra process runs;
- ``ms``: all plugins of one length run in one fresh process on the same inputs: each is
  warmed up (a small call, then one full-size call), then they are timed in interleaved
  rounds, one call of each per round, so a change in the machine's load hits all alike;
  up to ``--repeats`` rounds (fewer once ``--budget`` seconds per plugin are spent), and
  ``ms`` is the median;
- ``speedup_vs_dense`` divides the dense time at the same length by the row's time, both
  from the same process; dense is skipped above ``--dense-max-length`` (O(T^2): too slow),
  and the speed-up there is empty;
- ``floor_ms`` (attention only): the time the op's unavoidable memory traffic takes at the
  copy bandwidth measured in the timing process (one large device copy, best of five): the
  forward reads q, k, v and writes the output; the backward reads q, k, v, the output and
  its gradient and writes dq, dk, dv. ``x_floor`` is ``ms / floor_ms`` and ``gb_per_s``
  that traffic divided by ``ms``;
- ``flex`` compiles FlexAttention (``torch.compile``) and builds its block mask during the
  warm-up, outside the timed calls; it needs CUDA (FlexAttention has no CPU backward).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from lit_sparse.commands import reports_errors
from lit_sparse.errors import ConfigError

DEFAULT_LENGTHS = (1024, 4096, 16384)
LEARNED = "fibonacci_learned"
NATTEN = "natten"
FLEX = "flex"
DTYPES = ("float32", "bfloat16", "float16")


def bench_plugins(window: int, keys: int) -> dict[str, Any]:
    """Row name -> plugin: every registered plugin's ``bench_cases(keys, window)``."""
    from lit_sparse.attention.registry import all_bench_cases

    return all_bench_cases(keys, window)


def _plugin_names(window: int = 12) -> list[str]:
    return list(bench_plugins(window, fibonacci_keys(window, 1024)))


def _natten_available() -> bool:
    try:
        import natten_mps  # noqa: F401
    except ImportError:
        return False
    return True


def build_plugin(name: str, window: int, keys: int):
    """The plugin of row ``name``, configured to attend ``keys`` keys per query."""
    plugins = bench_plugins(window, keys)
    if name not in plugins:
        raise ValueError(f"no bench row {name!r}; rows: {', '.join(plugins)}")
    return plugins[name]


def flex_block_mask(distances, length: int, device):
    """FlexAttention's block mask for causal attention at the query - key ``distances``."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask

    allowed = torch.zeros(length, dtype=torch.bool, device=device)
    allowed[distances[distances < length].to(device)] = True

    def mask_mod(batch, head, q_index, kv_index):
        distance = q_index - kv_index
        return (distance >= 0) & allowed[distance.clamp(min=0)]

    compile_mask = torch.device(device).type == "cuda"  # the eager build is O(T^2) memory
    return create_block_mask(mask_mod, None, None, length, length, device, _compile=compile_mask)


def floor_bytes(spec: dict[str, Any]) -> int:
    """Bytes one forward + backward of attention must move at least (see module doc)."""
    import torch

    itemsize = getattr(torch, spec["dtype"]).itemsize
    heads, kv_heads = spec["heads"], spec["kv_heads"]
    per_row = 6 * (heads + kv_heads) * spec["dim"]  # fwd q k v o, bwd q k v o do dq dk dv
    return itemsize * spec["batch"] * spec["length"] * per_row


def fibonacci_keys(window: int, length: int) -> int:
    """Keys per query of fixed-alpha Fibonacci attention with ``window`` at ``length``."""
    from lit_sparse.attention import offsets

    return len(offsets.layer_distances(1.0, offsets.fibonacci_rungs(15), window, length))


# --- the child process: one measurement -------------------------------------------------


def _peak_bytes(device) -> int:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _copy_bandwidth(device) -> float:
    """Bytes per second (read + written) of one large copy on ``device``, best of five."""
    import torch

    size = (2 << 30) if device.type == "cuda" else (256 << 20)
    source = torch.ones(size, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    seconds = []
    for _ in range(6):
        _sync(device)
        start = time.perf_counter()
        target.copy_(source)
        _sync(device)
        seconds.append(time.perf_counter() - start)
    return 2 * size / min(seconds[1:])  # the first copy touches fresh pages: not counted


_INPUTS: dict[tuple[int, str], tuple] = {}


def _inputs(spec: dict[str, Any], length: int, device):
    """q, k, v and the output's gradient at ``length``, one set per length shared by every
    plugin of the process, in the model's layout: (B, T, h, D) tensors (viewed as
    (B, h, T, D) when attention is called)."""
    import torch

    key = (length, str(device))
    if key not in _INPUTS:
        dtype = getattr(torch, spec["dtype"])
        batch, head_dim = spec["batch"], spec["dim"]
        gen = torch.Generator(device="cpu").manual_seed(length)

        def make(heads: int):
            x = torch.randn(batch, length, heads, head_dim, generator=gen) * 0.5
            return x.to(device, dtype).requires_grad_()

        grad = torch.randn(batch, length, spec["heads"], head_dim, generator=gen)
        q, k, v = make(spec["heads"]), make(spec["kv_heads"]), make(spec["kv_heads"])
        _INPUTS[key] = (q, k, v, grad.to(device, dtype))
    return _INPUTS[key]


def _natten_attend(spec: dict[str, Any]):
    """natten's causal 1-D neighborhood attention over ``keys`` keys, in its (B, T, h, D)
    layout."""
    import natten_mps

    def attend(q, k, v):
        out = natten_mps.na1d(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            kernel_size=spec["keys"],
            is_causal=True,
        )
        return out.transpose(1, 2)

    return attend, []


def _flex_attend(spec: dict[str, Any], device):
    """FlexAttention (compiled once per length) with fibonacci's mask."""
    import torch
    from torch.nn.attention.flex_attention import flex_attention

    flex = torch.compile(flex_attention, dynamic=False)
    fibonacci = build_plugin("fibonacci", spec["window"], spec["keys"]).build(0, 16, spec["length"])
    masks = {}  # per length: the warm-up call builds (and compiles) the small one

    def attend(q, k, v):
        length = q.shape[2]
        if length not in masks:
            distances = fibonacci.slots(length, device).distances
            masks[length] = flex_block_mask(distances, length, device)
        return flex(q, k, v, block_mask=masks[length], enable_gqa=True)

    return attend, []


def _plugin_attend(spec: dict[str, Any], device):
    """The row's plugin: layer 0 of 16, built for the benched length."""
    plugin = build_plugin(spec["plugin"], spec["window"], spec["keys"])
    pattern = plugin.build(0, 16, spec["length"]).to(device)
    return pattern, list(pattern.parameters())


def _attention_case(spec: dict[str, Any]):
    """(case, device): case(length) gives run() = one forward + backward at ``length``."""
    import torch

    device = torch.device(spec["device"])
    if spec["plugin"] == NATTEN:
        attend, parameters = _natten_attend(spec)
    elif spec["plugin"] == FLEX:
        attend, parameters = _flex_attend(spec, device)
    else:
        attend, parameters = _plugin_attend(spec, device)

    def case(length: int):
        q, k, v, grad = _inputs(spec, length, device)
        tensors = [q, k, v, *parameters]

        def run():
            out = attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            out.backward(grad.transpose(1, 2))
            for t in tensors:
                t.grad = None

        return run

    return case, device


TRAIN_SHAPES = {
    # a small model (the default): 4 layers, d_model 128
    "small": {"vocab_size": 8192, "n_layers": 4, "d_model": 128, "n_heads": 4, "n_kv_heads": 2},
    # the paper's (docs/paper.md section 2): 16 layers, d_model 512, 8/2 heads of 64
    "paper": {"vocab_size": 32768, "n_layers": 16, "d_model": 512, "n_heads": 8, "n_kv_heads": 2},
}
"""``bench train --shape``: the model trained in each step."""


def _train_case(spec: dict[str, Any]):
    import torch
    import torch.nn.functional as F

    from lit_sparse import LanguageModel, ModelConfig

    device = torch.device(spec["device"])
    gen = torch.Generator(device="cpu").manual_seed(0)
    shape = TRAIN_SHAPES[spec["shape"]]
    vocab = shape["vocab_size"]

    def case(length: int):
        config = ModelConfig(
            context_length=length, head_dim=shape["d_model"] // shape["n_heads"], **shape
        )
        plugin = build_plugin(spec["plugin"], spec["window"], spec["keys"])
        torch.manual_seed(0)
        model = LanguageModel(config, plugin).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        batch = spec["batch"] if length == spec["length"] else 1
        ids = torch.randint(0, vocab, (batch, length + 1), generator=gen).to(device)

        def run():
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        return run

    return case, device


def _case(spec: dict[str, Any], plugin: str):
    spec = {**spec, "plugin": plugin}
    return (_train_case if spec["kind"] == "train" else _attention_case)(spec)


def _memory(spec: dict[str, Any]) -> dict[str, Any]:
    """Child process of one row: a small warm-up call, then the peak of one full call."""
    case, device = _case(spec, spec["plugin"])
    case(min(64, spec["length"]))()  # warm-up: threads, allocator, kernels
    _sync(device)
    return {"peak_mb": _call_peak_mb(case(spec["length"]), device)}


def _call_peak_mb(run, device) -> float:
    """The rise in peak memory over one call of ``run``: the process's resident set on the
    CPU (meaningful in a fresh process only), the allocator's peak on CUDA."""
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    before = _peak_bytes(device) if device.type == "cpu" else torch.cuda.memory_allocated(device)
    run()
    _sync(device)
    return max(0, _peak_bytes(device) - before) / 2**20


def _timing(spec: dict[str, Any]) -> dict[str, Any]:
    """Child process of one length: every plugin warmed up, then timed in interleaved rounds
    (one call of each per round), so a change in the machine's load hits them alike. A
    plugin that fails (out of memory, say) is reported under ``failed``; the rest run."""
    import torch

    device = torch.device(spec["device"])
    runs, peaks, failed = {}, {}, {}
    for plugin in spec["plugins"]:
        try:
            case, _ = _case(spec, plugin)
            case(min(64, spec["length"]))()
            _sync(device)
            run = case(spec["length"])
            run()  # the first full-size call: allocations, page faults, compilation
            _sync(device)
            if device.type == "cuda":  # the allocator's peak over a steady call
                peaks[plugin] = _call_peak_mb(run, device)
            runs[plugin] = run
        except Exception as error:  # any failure of one plugin spares the others
            failed[plugin] = f"{type(error).__name__}: {error}"[:500]
            _progress(f"T={spec['length']} {plugin}: failed: {failed[plugin]}")
        if plugin in failed:  # outside the handler: its traceback holds the failed frames
            run = case = None
            _release(device)
    timed = {}
    for busy in spec["busy_cores"]:
        with busy_cores(busy):
            times = _rounds(spec, runs, device, busy)
        timed[str(busy)] = {
            plugin: {"ms": 1e3 * sorted(ts)[len(ts) // 2], "runs": len(ts)}
            for plugin, ts in times.items()
        }
    bandwidth = _copy_bandwidth(device) if spec["kind"] == "attention" else None
    return {
        "bandwidth": bandwidth,
        "peaks": peaks if device.type == "cuda" else None,
        "failed": failed,
        "busy": timed,
    }


def _rounds(spec: dict[str, Any], runs: dict, device, busy: int) -> dict[str, list[float]]:
    """Interleaved timed rounds, one call of each plugin per round: up to ``repeats``
    rounds, fewer once ``budget`` seconds per plugin are spent."""
    times: dict[str, list[float]] = {plugin: [] for plugin in runs}
    rounds, spent = 0, 0.0
    while runs and rounds < spec["repeats"] and not (rounds and spent > spec["budget"] * len(runs)):
        for plugin, run in runs.items():
            start = time.perf_counter()
            run()
            _sync(device)
            times[plugin].append(time.perf_counter() - start)
            spent += times[plugin][-1]
        rounds += 1
        load = f", {busy} busy core{'s' * (busy != 1)}" if busy else ""
        _progress(f"T={spec['length']}: round {rounds} timed{load}")
    return times


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


def _release(device) -> None:
    """Hand back what a failed plugin left allocated (its tensors are unreachable by now)."""
    import gc

    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _measure(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    return _memory(spec) if spec["mode"] == "memory" else _timing(spec)


# --- the parent: fresh processes ----------------------------------------------------------


def _run_child(spec: dict[str, Any]) -> dict[str, Any] | None:
    command = [sys.executable, "-m", "lit_sparse.commands.bench", "_measure", json.dumps(spec)]
    result = subprocess.run(
        command, stdout=subprocess.PIPE, stderr=None, text=True, env=os.environ.copy()
    )  # the child's progress goes straight to our stderr
    if result.returncode != 0:
        _progress(f"{spec['mode']} run failed: {spec.get('plugin') or spec.get('plugins')}")
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def _progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _bench_rows_of(args: argparse.Namespace) -> list[str]:
    """The rows to time, dense first (the others divide by it), peers last."""
    kind = args.command
    plugins = list(args.plugins) if args.plugins else _plugin_names(args.window)
    if "dense" not in plugins:
        plugins.insert(0, "dense")
    plugins.sort(key=lambda p: p != "dense")
    if kind == "attention" and NATTEN not in plugins and args.plugins is None:
        if _natten_available():
            plugins.append(NATTEN)
        else:
            _progress("natten_mps is not installed: its peer row is skipped")
    if kind == "attention" and args.plugins is None and args.device == "cuda":
        plugins.append(FLEX)
    return plugins


def _train_batch(args: argparse.Namespace, length: int) -> int:
    """bench train's sequences per step: --tokens-per-step // T, by default 8192 tokens
    (small shape) or one sequence (the paper's shape)."""
    if args.tokens_per_step is None and args.shape == "paper":
        return 1
    return max(1, (args.tokens_per_step or 8192) // length)


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
        "batch": args.batch if kind == "attention" else _train_batch(args, length),
        "shape": getattr(args, "shape", None),
        "heads": getattr(args, "heads", 8),
        "kv_heads": getattr(args, "kv_heads", 2),
        "dim": getattr(args, "head_dim", 64),
        "repeats": args.repeats,
        "budget": args.budget,
        "threads": args.threads,
        "busy_cores": sorted(set(args.busy_cores)),
    }


def _peaks(spec: dict[str, Any], plugins: list[str]) -> dict[str, float | None]:
    """CPU: each row's peak memory, each in its own fresh process (CUDA: none here, the
    timing process reads the allocator's)."""
    peaks: dict[str, float | None] = {}
    for plugin in plugins if spec["device"] == "cpu" else ():
        _progress(f"T={spec['length']} {plugin}: peak memory ...")
        result = _run_child({**spec, "mode": "memory", "plugin": plugin})
        peaks[plugin] = None if result is None else result["peak_mb"]
    return peaks


def _length_rows(spec: dict[str, Any], plugins: list[str]) -> list[dict[str, Any]]:
    """Every row at one length: peaks, then the interleaved timing of all of them."""
    length, kind = spec["length"], spec["kind"]
    peaks = _peaks(spec, plugins)
    _progress(f"T={length}: timing {', '.join(plugins)} in interleaved rounds ...")
    measured = _run_child({**spec, "mode": "time", "plugins": plugins}) or {}
    peaks.update(measured.get("peaks") or {})
    failed = measured.get("failed") or {}
    floor_ms, traffic = None, floor_bytes(spec) if kind == "attention" else 0
    if measured.get("bandwidth"):
        floor_ms = 1e3 * traffic / measured["bandwidth"]
        _progress(
            f"T={length}: copy bandwidth {measured['bandwidth'] / 1e9:.1f} GB/s, "
            f"memory-traffic floor {floor_ms:.3f} ms"
        )
    by_load = measured.get("busy") or {}
    idle = by_load.get("0", {})
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
            row["x_idle"] = ms / idle[plugin]["ms"] if plugin in idle else None
            row["peak_mb"] = peaks.get(plugin)
            if floor_ms is not None:
                row.update(floor_ms=floor_ms, x_floor=ms / floor_ms, gb_per_s=traffic / ms / 1e6)
            rows.append(row)
            _report_row(row, timing[plugin]["runs"])
    return rows


def _report_row(row: dict[str, Any], runs: int) -> None:
    speed, peak = row["speedup_vs_dense"], row["peak_mb"]
    load = f" ({row['busy_cores']} busy)" if row["busy_cores"] else ""
    _progress(
        f"T={row['T']} {row['plugin']}{load}: {row['ms']:.1f} ms (median of {runs})"
        + ("" if speed is None else f", x{speed:.2f} vs dense")
        + ("" if peak is None else f", peak {peak:.0f} MB")
    )


def run_bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every row at every length of ``args``, each length in fresh processes."""
    plugins = _bench_rows_of(args)
    rows: list[dict[str, Any]] = []
    for length in args.lengths:
        here = [p for p in plugins if p != "dense" or length <= args.dense_max_length]
        if len(here) < len(plugins):
            _progress(f"T={length} dense: skipped (above --dense-max-length)")
        rows += _length_rows(_length_spec(args, length), here)
    return rows


def bench_table(rows: list[dict[str, Any]], kind: str) -> str:
    """The rows as a Markdown table ("-" where a value is missing); the busy cores and the
    ratio to the idle time when any row ran with busy cores."""
    from lit_sparse.tables import markdown_table

    per = "ms fwd+bwd" if kind == "attention" else "ms/step"
    columns = [("T", "T", "d"), ("plugin", "plugin", "s")]
    loaded = any(row.get("busy_cores") for row in rows)
    if loaded:
        columns.append(("busy_cores", "busy cores", "d"))
    columns.append(("ms", per, ".1f"))
    if loaded:
        columns.append(("x_idle", "x idle", ".2f"))
    if kind == "train":
        columns.append(("tokens_per_s", "tokens/s", ".0f"))
    columns += [("speedup_vs_dense", "x dense", ".2f"), ("peak_mb", "peak MB", ".0f")]
    if kind == "attention":
        columns += [("gb_per_s", "GB/s", ".1f"), ("x_floor", "x floor", ".2f")]

    def cell(row, key, fmt):
        value = row.get(key)
        return "-" if value is None else format(value, fmt)

    body = [[cell(row, key, fmt) for key, _, fmt in columns] for row in rows]
    align = "".join("l" if fmt == "s" else "r" for _, _, fmt in columns)
    return markdown_table([title for _, title, _ in columns], body, align=align)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lit_sparse bench", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    attention = sub.add_parser("attention", help="one attention call, forward + backward")
    train = sub.add_parser("train", help="whole AdamW training steps of the quickstart shape")
    for p, window in ((attention, 12), (train, 8)):
        p.add_argument("--lengths", type=int, nargs="+", default=None, help="sequence lengths")
        p.add_argument(
            "--plugins",
            nargs="+",
            default=None,
            help="rows: every registered plugin's bench cases (e.g. fibonacci, "
            f"{LEARNED}, an installed package's plugin), '{NATTEN}' or '{FLEX}' (CUDA) "
            "(default: all; flex on CUDA only); dense always runs",
        )
        p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
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
    attention.add_argument("--batch", type=int, default=1)
    attention.add_argument(
        "--dtype",
        choices=DTYPES,
        default="float32",
        help="dtype of q, k, v (the CPU kernel computes in float32 whatever it gets)",
    )
    attention.add_argument("--heads", type=int, default=8)
    attention.add_argument("--kv-heads", type=int, default=2)
    attention.add_argument("--head-dim", type=int, default=64)
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
    return parser


def _decode_parser(sub) -> None:
    from lit_sparse.generation.decode_bench import CONTEXTS, PLUGINS, DecodeBenchSpec

    defaults = DecodeBenchSpec()
    decode = sub.add_parser(
        "decode", help="per-token decoding latency and KV-cache size after long contexts"
    )
    decode.add_argument("--contexts", type=int, nargs="+", default=list(CONTEXTS))
    decode.add_argument("--plugins", nargs="+", choices=PLUGINS, default=list(PLUGINS))
    decode.add_argument("--tokens", type=int, default=defaults.tokens, help="timed per row")
    decode.add_argument("--window", type=int, default=defaults.window, help="fibonacci W")
    for name in ("n_layers", "d_model", "n_heads", "n_kv_heads", "vocab_size", "training_length"):
        flag = "--" + name.replace("_", "-")
        decode.add_argument(flag, type=int, default=getattr(defaults, name), dest=name)
    decode.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    decode.add_argument(
        "--rss-tokens",
        type=int,
        default=defaults.rss_tokens,
        help="tokens the RSS check decodes with fibonacci (0: no check)",
    )
    decode.add_argument("--rss-context", type=int, default=defaults.rss_context)
    decode.add_argument("--rss-after", type=int, default=defaults.rss_after)
    decode.add_argument("--json", default=None, help="write the rows to this file")


def _decode(args: argparse.Namespace) -> int:
    from lit_sparse.generation.decode_bench import DecodeBenchSpec, format_rows, run_decode_bench

    options = {k: v for k, v in vars(args).items() if k not in ("command", "json")}
    spec = DecodeBenchSpec(**options)
    rows = run_decode_bench(spec, progress=_progress)
    print(format_rows(rows))
    if args.json:
        from lit_sparse.atomic_files import write_json

        write_json(args.json, rows)
    return 1 if any("error" in row for row in rows) else 0


@reports_errors
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_measure"]:  # the child process of one row
        print(json.dumps(_measure(json.loads(argv[1]))))
        return 0
    args = _parser().parse_args(argv)
    if args.command == "decode":
        return _decode(args)
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
    known = {*_plugin_names(args.window), NATTEN, FLEX}
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
    if FLEX in (args.plugins or ()) and (args.command != "attention" or args.device != "cuda"):
        print(
            f"--plugins {FLEX}: FlexAttention is timed on CUDA only (it has no backward on the"
            " CPU) and in `bench attention`; use `bench attention --device cuda`",
            file=sys.stderr,
        )
        return 2
    rows = run_bench(args)
    print(bench_table(rows, args.command))
    if args.json:
        from lit_sparse.atomic_files import write_json

        write_json(args.json, rows)
    errors = [row for row in rows if "error" in row]
    for row in errors:
        print(f"T={row['T']} {row['plugin']} failed: {row['error']}", file=sys.stderr)
    return 0 if rows and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
