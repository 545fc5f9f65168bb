"""The GPU plan: one command that measures what a CUDA machine can tell us, in at most 8
minutes on one GPU (``python -m lit_sparse bench gpu --json out.json``).

Steps, each in its own process with a time budget (a step past its budget is stopped and
reported; the others still run):

1. ``tests``: the ``gpu``-marked tests (the Triton kernel against the reference, values
   and gradients; dense GQA on a fused kernel);
2. ``attention``: forward + backward at B = 8, T = 4k to 64k, bfloat16: the Triton kernel
   (fibonacci), FlexAttention with fibonacci's block mask, flash-attn dense and sliding
   window (when flash-attn is installed; else SDPA and the Triton kernel serve them) and
   SDPA, with ``x floor`` against the HBM bandwidth measured by a device copy;
3. ``decode``: ``bench decode`` on CUDA at 4k and 64k contexts, batch 1 and 32, float32 and
   bfloat16, with ``x floor`` (the weights' bytes over the HBM bandwidth);
4. ``train``: ``bench train --shape paper``, 20 timed AdamW steps at 4k.

``--dry-run`` prints the plan and, on any machine, checks that every piece imports and
builds its inputs (the tests collect, each bench's options parse, each row's plugin, block
mask, model and inputs are made at a small size on the CPU); what only a GPU machine has
(CUDA, flash-attn) is named, not required.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lit_sparse import ConfigError
from lit_sparse_studies.bench.timing import progress

__all__ = [
    "PLAN",
    "BenchCli",
    "run_command",
    "DryRun",
    "Step",
    "check_step",
    "describe",
    "dry_run",
    "plan",
    "run_plan",
]

GPU_TESTS = ["tests/kernels/test_triton_cuda.py", "tests/attention/test_dense_cuda.py"]
BUDGET_S = 480
"""The whole plan's time on one GPU, at most."""


@dataclass(frozen=True)
class Step:
    """One step of the plan: ``args`` after ``python -m``, its budget in seconds, and
    whether it writes bench rows (``--json`` is added)."""

    name: str
    args: list[str]
    budget_s: int
    what: str
    bench: bool = True
    floor: bool = False
    """Whether its rows carry ``x_floor`` (here: against the HBM bandwidth)."""

    def command(self, json_path: str | None = None) -> list[str]:
        extra = ["--json", json_path] if self.bench and json_path else []
        return [sys.executable, "-m", *self.args, *extra]


PLAN = [
    Step(
        "tests",
        ["pytest", "-q", "-m", "gpu", "-n", "0", "-p", "no:cacheprovider", *GPU_TESTS],
        90,
        "the gpu-marked tests: the Triton kernel and dense GQA against the references",
        bench=False,
    ),
    Step(
        "attention",
        ["lit_sparse", "bench", "attention", "--device", "cuda", "--dtype", "bfloat16"]
        + ["--batch", "8", "--lengths", "4096", "16384", "65536", "--dense-max-length", "65536"]
        + ["--plugins", "fibonacci", "sliding_window", "sdpa", "flex:fibonacci"]
        + ["--repeats", "5", "--budget", "3"],
        240,
        "fwd+bwd, B=8, bf16, T=4k-64k: Triton (fibonacci), FlexAttention, flash-attn dense "
        "and sliding window, SDPA",
        floor=True,
    ),
    Step(
        "decode",
        ["lit_sparse", "bench", "decode", "--device", "cuda", "--contexts", "4096", "65536"]
        + ["--batch", "1", "32", "--dtype", "float32", "bfloat16", "--rss-tokens", "0"]
        + ["--plugins", "dense", "fibonacci", "sliding_window"],
        90,
        "decoding steps on CUDA after 4k and 64k contexts, batch 1 and 32, fp32 and bf16: "
        "dense, fibonacci, sliding window",
        floor=True,
    ),
    Step(
        "train",
        ["lit_sparse", "bench", "train", "--device", "cuda", "--shape", "paper"]
        + ["--lengths", "4096", "--plugins", "fibonacci", "--repeats", "20", "--budget", "20"],
        60,
        "20 AdamW steps of the paper's shape at 4k (fewer past 20 s each), fibonacci against dense",
    ),
]
assert sum(step.budget_s for step in PLAN) <= BUDGET_S


def plan(steps: list[str] | None = None) -> list[Step]:
    """The plan's steps, all or the named ones (in the plan's order)."""
    names = [step.name for step in PLAN]
    unknown = sorted(set(steps or ()) - set(names))
    if unknown:
        raise ConfigError(f"--steps {unknown[0]}: expected some of {', '.join(names)}")
    return [step for step in PLAN if steps is None or step.name in steps]


def describe(steps: list[Step]) -> str:
    """The plan in words: one paragraph per step with its budget and command."""
    lines = [f"GPU plan: {len(steps)} steps, at most {sum(s.budget_s for s in steps)} s"]
    for number, step in enumerate(steps, start=1):
        floor = " (x HBM floor)" if step.floor else ""
        lines.append(f"{number}. {step.name} ({step.budget_s} s): {step.what}{floor}")
        lines.append("   python -m " + " ".join(step.args))
    return "\n".join(lines)


# ---------------------------------------------------------------------- dry run (any machine)
@dataclass(frozen=True)
class BenchCli:
    """How ``bench`` reads its options, handed in by the command (this layer may not import
    it): ``parse_args(argv)`` and ``length_spec(args, length)``, the row spec of one length."""

    parse_args: Callable[[list[str]], Any]
    length_spec: Callable[[Any, int], dict[str, Any]]


def _optional(module: str) -> str | None:
    """None when ``module`` imports, else why not."""
    import importlib

    try:
        importlib.import_module(module)
    except Exception as error:  # ImportError, or a library that fails to load here
        return f"{type(error).__name__}: {error}"[:200]
    return None


def _check_tests(step: Step, cli: BenchCli) -> list[str]:
    root = Path(__file__).resolve().parents[2]
    missing = [path for path in GPU_TESTS if not (root / path).is_file()]
    if missing:
        raise RuntimeError(f"the gpu tests {missing} are not in this checkout ({root})")
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-n", "0"]
    command += ["-p", "no:cacheprovider", *GPU_TESTS]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise RuntimeError("collecting the gpu tests failed: " + " / ".join(tail))
    counted = [line for line in done.stdout.splitlines() if "::" in line]
    return [f"{len(counted)} gpu tests collect"]


def _bench_args(step: Step, cli: BenchCli):
    """The step's options as ``bench`` parses them (its own checks included)."""
    try:
        return cli.parse_args(step.args[2:])
    except SystemExit:  # argparse said why on stderr
        raise RuntimeError(f"its options do not parse: {' '.join(step.args[2:])}") from None


def _check_attention(step: Step, cli: BenchCli) -> list[str]:
    from lit_sparse_studies.bench.attention import attention_case, is_flex

    args = _bench_args(step, cli)
    notes = []
    for name, reason in (("triton", "the Triton kernel (fibonacci, sliding window)"),):
        why = _optional(name)
        if why:
            raise RuntimeError(f"{name} does not import ({why}): needed for {reason}")
    from lit_sparse.kernels import triton_attention  # noqa: F401  the GPU kernel imports

    if _optional("flash_attn"):
        notes.append(
            "flash-attn is not installed here: on the GPU, dense and sliding_window run on it "
            "only where it is (pip install lit_sparse[flash]); else SDPA and the Triton kernel"
        )
    length = 256  # two FlexAttention tiles
    for plugin in ["dense", *args.plugins]:
        spec = cli.length_spec(args, length)
        spec.update(plugin=plugin, device="cpu", dtype="float32", batch=1)  # small, on the CPU
        case, _ = attention_case(spec)
        run = case(64)  # the inputs and the plugin; flex builds its block mask on its call
        run()
        if is_flex(plugin):
            from lit_sparse_studies.bench.attention import (
                block_density,
                build_plugin,
                flex_block_mask,
            )

            pattern = build_plugin(plugin[5:], args.window, spec["keys"]).build(0, 16, 4096)
            mask = flex_block_mask(pattern.slots(4096, "cpu"), 4096, "cpu")
            notes.append(f"{plugin}: block mask at 4k keeps {block_density(mask):.2f} of tiles")
    notes.append(f"rows {', '.join(['dense', *args.plugins])}: plugins and inputs built")
    return notes


def _check_decode(step: Step, cli: BenchCli) -> list[str]:
    from lit_sparse_studies.bench.decode import DecodeBenchSpec, _Decoder, decode_model

    args = _bench_args(step, cli)
    options = {k: v for k, v in vars(args).items() if k not in ("command", "json")}
    spec = DecodeBenchSpec(**{**options, "device": "cpu"})  # the step's checks, on the CPU
    small = DecodeBenchSpec(**{**options, "device": "cpu", "n_layers": 1, "vocab_size": 512})
    for plugin in spec.plugins:
        for dtype in spec.dtypes:
            decoder = _Decoder(decode_model(small, plugin, dtype), max(spec.batch), 64, 2)
            decoder.step()
    return [f"{len(spec.plugins)} plugins x {spec.dtypes}: models and caches built"]


def _check_train(step: Step, cli: BenchCli) -> list[str]:
    from lit_sparse_studies.bench.train import train_case

    args = _bench_args(step, cli)
    args.device = "cpu"
    spec = {**cli.length_spec(args, 64), "shape": "small"}
    for plugin in args.plugins or ["fibonacci"]:
        case, _ = train_case({**spec, "plugin": plugin})
        case(64)  # the model, optimizer and batch (not a step: the paper's shape is slow here)
    return [f"paper-shape steps of {args.plugins}: options parse, model and batch built"]


CHECKS = {
    "tests": _check_tests,
    "attention": _check_attention,
    "decode": _check_decode,
    "train": _check_train,
}


def check_step(step: Step, cli: BenchCli) -> list[str]:
    """What the dry run says about ``step`` (raises when a piece does not import or build)."""
    return CHECKS[step.name](step, cli)


# ---------------------------------------------------------------------- the run (a GPU)
def _run_step(step: Step, folder: Path, progress) -> dict[str, Any]:
    json_path = str(folder / f"{step.name}.json")
    command = step.command(json_path)
    progress(f"{step.name}: {' '.join(command[1:])} (budget {step.budget_s} s)")
    start = time.perf_counter()
    try:
        done = subprocess.run(command, timeout=step.budget_s, env=os.environ.copy())
        rc, note = done.returncode, None
    except subprocess.TimeoutExpired:
        rc, note = None, f"stopped after its budget of {step.budget_s} s"
    seconds = time.perf_counter() - start
    result: dict[str, Any] = {
        "step": step.name,
        "command": " ".join(["python", *command[1:]]),
        "rc": rc,
        "seconds": seconds,
    }
    if note:
        result["note"] = note
    if step.bench and Path(json_path).is_file():
        result["rows"] = json.loads(Path(json_path).read_text())
    progress(f"{step.name}: exit {rc}, {seconds:.0f} s" + (f" ({note})" if note else ""))
    return result


def run_plan(steps: list[Step], progress) -> dict[str, Any]:
    """Every step on the GPU, in order; the results and each bench's rows."""
    import torch

    device = torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory() as folder:
        results = [_run_step(step, Path(folder), progress) for step in steps]
    return {
        "device": device,
        "torch": torch.__version__,
        "steps": results,
        "seconds": sum(r["seconds"] for r in results),
    }


@dataclass
class DryRun:
    """What ``--dry-run`` found, per step."""

    notes: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


def dry_run(steps: list[Step], cli: BenchCli, progress) -> DryRun:
    """Check every step on this machine (see the module's docstring); go on past a failure."""
    found = DryRun()
    for step in steps:
        try:
            found.notes[step.name] = check_step(step, cli)
            for note in found.notes[step.name]:
                progress(f"{step.name}: {note}")
        except Exception as error:  # report each broken piece, check the rest
            found.failed[step.name] = f"{type(error).__name__}: {error}"[:500]
            progress(f"{step.name}: FAILED: {found.failed[step.name]}")
    return found


def run_command(args: Any, cli: BenchCli) -> int:
    """``bench gpu``: the plan printed, then checked (``--dry-run``) or run on CUDA with
    every step's result written to ``--json``; 1 when a step failed."""
    steps = plan(args.steps)
    print(describe(steps))
    if args.dry_run:
        found = dry_run(steps, cli, progress)
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
    from lit_sparse.io import write_json

    write_json(args.json, result)
    failed = [r["step"] for r in result["steps"] if r["rc"] != 0]
    print(f"{len(steps) - len(failed)} of {len(steps)} steps passed in {result['seconds']:.0f} s")
    return 1 if failed else 0
