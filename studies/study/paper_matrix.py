"""The paper's run matrix (docs/paper.md section 4) and its published numbers (section 6).

W in {6, 8, 10, 12} for fib fixed, fib learned, fib linear, fib coprime and pow2 linear (20
runs), pow2 fixed at W=8 (21 sparse runs), and dense. ``identify`` names the matrix run an
attention config is, so a run's numbers can be placed beside the paper's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from lit_sparse.attention import Custom, build_attention, to_schedule

__all__ = [
    "CONFIG_DIR",
    "PAPER",
    "PAPER_ARCH",
    "PAPER_SETS",
    "RUNS",
    "WINDOWS",
    "MatrixRun",
    "identify",
]

CONFIG_DIR = Path(resources.files("lit_sparse") / "configs").resolve()
"""The shipped configs: package data in an installed wheel (``lit_sparse/configs``); in a
checkout, ``lit_sparse/configs`` links to the repository's ``configs/`` folder."""
WINDOWS = (6, 8, 10, 12)
PAPER_SETS = ("fineweb_edu", "wikipedia", "tinystories", "math")


@dataclass(frozen=True)
class MatrixRun:
    """One run of the paper's matrix."""

    name: str
    config: str
    """Config file, relative to the repository's ``configs/``."""
    window: int | None
    row: str
    """The paper's name of its schedule (``fib linear``)."""

    def overrides(self) -> list[str]:
        out = (
            [] if self.window is None else ["--model.attention.init_args.window", str(self.window)]
        )
        return out + ["--trainer.logger.init_args.name", self.name]

    def config_path(self, config_dir: Path = CONFIG_DIR) -> Path:
        return Path(config_dir) / self.config

    def fit_args(self, extra: Sequence[str] = (), config_dir: Path = CONFIG_DIR) -> list[str]:
        return ["fit", "--config", str(self.config_path(config_dir)), *self.overrides(), *extra]


def _matrix() -> list[MatrixRun]:
    families = [
        ("fib_fixed", "fixed.yaml", "fib fixed"),
        ("fib_learned", "learned.yaml", "fib learned"),
        ("fib_linear", "staggered.yaml", "fib linear"),
        ("fib_coprime", "coprime.yaml", "fib coprime"),
        ("pow2_linear", "pow2_staggered.yaml", "pow2 linear"),
    ]
    runs = [
        MatrixRun(f"{prefix}_w{w}", config, w, row)
        for prefix, config, row in families
        for w in WINDOWS
    ]
    runs.append(MatrixRun("pow2_fixed_w8", "pow2.yaml", 8, "pow2 fixed"))
    runs.append(MatrixRun("dense", "dense.yaml", None, "dense"))
    return runs


RUNS = {run.name: run for run in _matrix()}
"""The 21 sparse runs and dense, by name."""


def _ppl(text: str) -> tuple[float | None, ...]:
    return tuple(float(v) for v in text.split("/"))


PAPER: dict[str, dict[str, Any]] = {
    **{
        f"{prefix}_w{w}": {"ppl": dict(zip(PAPER_SETS, _ppl(cell), strict=True))}
        for prefix, cells in {
            "fib_fixed": "44.35/40.24/5.57/3.45 44.08/40.02/5.55/3.45 43.48/39.33/5.48/3.42 "
            "43.12/39.05/5.44/3.39",
            "fib_learned": "43.86/39.62/5.53/3.40 43.70/39.43/5.52/3.40 42.99/38.80/5.43/3.35 "
            "42.85/38.60/5.40/3.35",
            "fib_linear": "42.93/38.59/5.39/3.28 42.53/38.07/5.36/3.27 42.21/37.88/5.33/3.26 "
            "42.02/37.59/5.30/3.25",
            "fib_coprime": "43.10/38.70/5.40/3.29 42.58/38.27/5.37/3.28 42.28/38.00/5.33/3.27 "
            "42.09/37.75/5.30/3.26",
            "pow2_linear": "44.11/39.89/5.54/3.43 43.60/39.56/5.48/3.41 43.17/39.05/5.43/3.39 "
            "42.69/38.51/5.38/3.36",
        }.items()
        for w, cell in zip(WINDOWS, cells.split(), strict=True)
    },
    "pow2_fixed_w8": {"ppl": dict(zip(PAPER_SETS, _ppl("44.78/40.89/5.67/3.55"), strict=True))},
    "dense": {"ppl": {"fineweb_edu": 33.37, "wikipedia": 27.28}},
}
"""The paper's numbers (docs/paper.md section 6): held-out perplexity per set ("ppl"),
FineWeb-Edu perplexity at 1024/2048/4096 ("extrap") and FineWeb-Edu NLL in 8 position
bins ("bins")."""
for _name, _values in {
    "dense": (33.37, 49.15, 100.36),
    "fib_linear_w12": (42.02, 41.65, 41.45),
    "fib_coprime_w12": (42.09, 42.53, 43.25),
    "fib_fixed_w8": (44.08, 43.74, 43.56),
    "fib_learned_w8": (43.70, 43.34, 43.15),
    "pow2_fixed_w8": (44.78, 44.98, 49.86),
}.items():
    PAPER[_name]["extrap"] = {"fineweb_edu": dict(zip((1024, 2048, 4096), _values, strict=True))}
PAPER["fib_fixed_w8"]["bins"] = {
    "fineweb_edu": [3.883, 3.808, 3.767, 3.770, 3.742, 3.780, 3.776, 3.763]
}
PAPER["fib_linear_w8"]["bins"] = {
    "fineweb_edu": [3.861, 3.769, 3.733, 3.731, 3.709, 3.737, 3.739, 3.726]
}

PAPER_ARCH = {
    "n_layers": 16,
    "d_model": 512,
    "n_heads": 8,
    "n_kv_heads": 2,
    "head_dim": 64,
}


def identify(attention: dict[str, Any] | None) -> tuple[str | None, str]:
    """(matrix name or None, label) of an attention config {class_path, init_args}."""
    attention = attention or {}
    class_path = str(attention.get("class_path", "dense"))
    args = attention.get("init_args") or {}
    short = class_path.rsplit(".", 1)[-1]
    if short in ("DenseAttention", "dense"):
        return "dense", "dense"
    if short not in ("FibonacciAttention", "fibonacci"):
        window = f" W={args['window']}" if "window" in args else ""
        return None, f"{short}{window}"
    plugin = build_attention({"class_path": class_path, "init_args": args})  # any version's form
    schedule, rungs = plugin.schedule, "fib" if plugin.rungs == "fibonacci" else plugin.rungs
    name = f"{rungs}_{schedule.name}_w{plugin.window}"
    # the paper's options: its schedule's defaults (a custom one is never a matrix run)
    defaults = schedule if isinstance(schedule, Custom) else to_schedule(schedule.name)
    standard = plugin.n_rungs == 15 and plugin.new_offsets == "use" and schedule == defaults
    if name in RUNS and standard:
        return name, name
    return None, name + ("" if standard else " (non-standard options)")
