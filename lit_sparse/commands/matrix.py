"""``python -m lit_sparse matrix``: the paper's run matrix, and its tables from run directories.

The matrix (docs/paper.md section 4): W in {6, 8, 10, 12} for fib fixed, fib learned, fib
linear, fib coprime and pow2 linear (20 runs), pow2 fixed at W=8 (21 sparse runs), and dense.

    python -m lit_sparse matrix --list
    python -m lit_sparse matrix --run fib_linear_w12                    # the paper's recipe
    python -m lit_sparse matrix --run fib_coprime_w8 --config configs/quickstart.yaml
    python -m lit_sparse matrix --table runs/fib_fixed_w8 runs/fib_linear_w8

``--run NAME [overrides]`` runs ``python -m lit_sparse fit --config <config>
--model.attention.init_args.window W --trainer.logger.init_args.name NAME [overrides]`` in
this process, so the run lands in ``<save_dir>/NAME/version_N`` (``runs/NAME/...``; with the
quickstart config ``runs/quickstart/NAME/...``). ``--table RUN_DIR...`` rebuilds the paper's
Table 1 (held-out perplexity per set: the last ``val/ppl/<set>`` in the TensorBoard events),
Table 3 (length extrapolation: ``extrapolation.json``) and Table 4 (position-binned loss:
``position_loss.json``) as Markdown, with the paper's numbers beside a run whose attention
is one of the matrix's runs (its "setup" column says whether the model, data and steps are
the paper's too, i.e. whether the numbers are comparable).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lit_sparse.commands import reports_errors
from lit_sparse.config_files import load_yaml
from lit_sparse.errors import ConfigError
from lit_sparse.tables import markdown_table

__all__ = ["PAPER", "RUNS", "MatrixRun", "RunRecord", "main", "read_run", "tables"]

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
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


# ------------------------------------------------------------------------ reading runs
@dataclass
class RunRecord:
    """What one run directory holds for the tables."""

    path: Path
    matrix_name: str | None
    """The matrix run its attention is (None: not one of the paper's runs)."""
    label: str
    """matrix name, or a description of the attention."""
    setup: str
    """``paper`` when model, data and steps are the paper's, else how they differ."""
    step: int | None
    ppl: dict[str, float] = field(default_factory=dict)
    extrapolation: Any = None  # ExtrapolationResult
    bins: dict[str, list[float | None]] = field(default_factory=dict)


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
    rungs, schedule = args.get("rungs", "fibonacci"), args.get("schedule", "fixed")
    window = args.get("window", 8)
    name = f"{'fib' if rungs == 'fibonacci' else rungs}_{schedule}_w{window}"
    standard = (
        args.get("n_rungs", 15) == 15
        and args.get("alpha_min", 0.5) == 0.5
        and args.get("alpha_max", 1.5) == 1.5
        and args.get("alpha_init") is None
        and args.get("rung_read", "interpolate") == "interpolate"
        and args.get("new_offsets", "use") == "use"
    )
    if name in RUNS and standard:
        return name, name
    return None, name + ("" if standard else " (non-standard options)")


def _setup(config: dict[str, Any], sets: Sequence[str]) -> str:
    model = config.get("model") or {}
    arch = model.get("arch") or {}
    data = config.get("data") or {}
    init_args = data.get("init_args") or {} if isinstance(data, dict) else {}
    seq_len = init_args.get("seq_len")
    steps = (config.get("trainer") or {}).get("max_steps")
    differ = []
    shape = {k: arch.get(k, v) for k, v in PAPER_ARCH.items()}
    if shape != PAPER_ARCH:
        differ.append(f"{shape['n_layers']}L d{shape['d_model']}")
    if seq_len not in (None, 1024):
        differ.append(f"T={seq_len}")
    if sorted(sets) != sorted(PAPER_SETS):
        differ.append("sets " + "/".join(sets) if sets else "no held-out sets")
    if steps not in (None, 13000):
        differ.append(f"{steps} steps")
    return "paper" if not differ else ", ".join(differ)


def _last_scalars(run_dir: Path, prefix: str) -> tuple[dict[str, float], int | None]:
    """The last value of every scalar tag ``<prefix><name>`` in the run's events."""
    if not any(run_dir.glob("events.out.tfevents.*")):
        return {}, None
    from tensorboard.backend.event_processing.event_accumulator import (
        SCALARS,
        EventAccumulator,
    )

    events = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})
    events.Reload()
    values, step = {}, None
    for tag in events.Tags().get("scalars", []):
        if tag.startswith(prefix) and "/" not in tag[len(prefix) :]:
            last = max(events.Scalars(tag), key=lambda e: (e.step, e.wall_time))
            values[tag[len(prefix) :]] = float(last.value)
            step = last.step if step is None else max(step, last.step)
    return values, step


def read_run(path: str | Path) -> RunRecord:
    """Read a run directory (or an experiment folder: its newest version)."""
    from lit_sparse.analysis import read_extrapolation, read_result_json, resolve_run_dir

    run_dir = resolve_run_dir(Path(path))
    if not run_dir.is_dir():
        raise ConfigError(f"RUN_DIR {path}: no such directory")
    config: dict[str, Any] = {}
    if (run_dir / "config.yaml").is_file():
        config = load_yaml(run_dir / "config.yaml", "run config")
    elif (run_dir / "hparams.yaml").is_file():
        config = {"model": load_yaml(run_dir / "hparams.yaml", "run hparams")}
    else:
        raise ConfigError(f"RUN_DIR {path}: no config.yaml or hparams.yaml (not a run directory)")
    attention = (config.get("model") or {}).get("attention")
    name, label = identify(attention)
    ppl, step = _last_scalars(run_dir, "val/ppl/")
    extrapolation = read_extrapolation(run_dir / "extrapolation.json")
    bins = {}
    position = read_result_json(run_dir / "position_loss.json")
    if position is not None:
        bins = position.get("sets") or {}
        step = position.get("step", step)  # the weights' step (events carry the one before)
    if extrapolation is not None and extrapolation.step is not None:
        step = extrapolation.step
    sets = list(ppl) or (extrapolation.sets if extrapolation else list(bins))
    if not ppl and extrapolation is not None:  # no events: the training-length evaluation
        ppl = {s: extrapolation.ppl(s, extrapolation.training_length) for s in extrapolation.sets}
    return RunRecord(run_dir, name, label, _setup(config, sets), step, ppl, extrapolation, bins)


# ---------------------------------------------------------------------------- tables
def _cell(value: float | None, digits: int = 2) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _ours(record: RunRecord) -> str:
    return f"ours: {record.path}"


def table1(records: Sequence[RunRecord]) -> str:
    """Held-out perplexity per set (the paper's Table 1)."""
    ours_sets = {s for r in records for s in r.ppl}
    columns = [
        s for s in PAPER_SETS if s in ours_sets or any(r.matrix_name in PAPER for r in records)
    ]
    columns += sorted(ours_sets - set(PAPER_SETS))
    rows = []
    for record in records:
        rows.append(
            [record.label, _ours(record), record.setup, str(record.step)]
            + [_cell(record.ppl.get(s)) for s in columns]
        )
        paper = PAPER.get(record.matrix_name or "", {}).get("ppl")
        if paper:
            rows.append(
                [record.label, "paper", "paper", "13000"] + [_cell(paper.get(s)) for s in columns]
            )
    return "\n".join(
        [
            "Table 1: held-out perplexity per set (ours: the last val/ppl/<set> logged)",
            "",
            markdown_table(["run", "source", "setup", "step", *columns], rows),
        ]
    )


def table3(records: Sequence[RunRecord]) -> str:
    """Perplexity at 1x, 2x and 4x the training length (the paper's Table 3)."""
    rows = []
    for record in records:
        result = record.extrapolation
        if result is not None:
            lengths = result.lengths
            for name in result.sets:
                values = [result.ppl(name, t) for t in lengths]
                change = result.change_pct(name, lengths[-1])
                rows.append(
                    [record.label, _ours(record), record.setup, name, "/".join(map(str, lengths))]
                    + [" / ".join(_cell(v) for v in values), _cell(change, 1)]
                )
        paper = PAPER.get(record.matrix_name or "", {}).get("extrap")
        if paper:
            for name, by_length in paper.items():
                values = list(by_length.values())
                change = 100 * (values[-1] / values[0] - 1)
                rows.append(
                    [record.label, "paper", "paper", name, "/".join(map(str, by_length))]
                    + [" / ".join(_cell(v) for v in values), _cell(change, 1)]
                )
    if not rows:
        return "Table 3: length extrapolation: no extrapolation.json in these runs"
    return "\n".join(
        [
            "Table 3: perplexity at the training length and beyond (change: the longest length "
            "against the training length, %)",
            "",
            markdown_table(
                ["run", "source", "setup", "set", "lengths", "perplexity", "change %"], rows
            ),
        ]
    )


def table4(records: Sequence[RunRecord]) -> str:
    """Position-binned NLL and its gaps (the paper's Table 4)."""
    entries: list[tuple[str, str, str, str, list[float | None]]] = []
    for record in records:
        for name, values in record.bins.items():
            entries.append((record.label, _ours(record), record.setup, name, list(values)))
        paper = PAPER.get(record.matrix_name or "", {}).get("bins")
        if paper:
            for name, values in paper.items():
                entries.append((record.label, "paper", "paper", name, list(values)))
    if not entries:
        return "Table 4: position-binned loss: no position_loss.json in these runs"
    n_bins = max(len(e[4]) for e in entries)
    header = ["run", "source", "setup", "set", *(f"b{k}" for k in range(n_bins)), "first-last"]
    rows = []
    for label, source, setup, name, values in entries:
        cells = [_cell(v, 3) for v in values] + ["-"] * (n_bins - len(values))
        first_last = (
            values[0] - values[-1] if values and None not in (values[0], values[-1]) else None
        )
        rows.append([label, source, setup, name, *cells, _cell(first_last, 3)])
    gaps = []
    by_source: dict[tuple[str, str], list[tuple[str, list[float | None]]]] = {}
    for label, source, _, name, values in entries:
        kind = "paper" if source == "paper" else "ours"
        by_source.setdefault((kind, name), []).append((label, values))
    for (kind, name), members in by_source.items():
        reference_label, reference = members[0]
        for label, values in members[1:]:
            if len(values) != len(reference):
                continue
            diffs = [
                None if a is None or b is None else a - b
                for a, b in zip(values, reference, strict=True)
            ]
            mean = [d for d in diffs if d is not None]
            gaps.append(
                [f"{label} - {reference_label}", kind, name]
                + [_cell(d, 3) for d in diffs]
                + ["-"] * (n_bins - len(diffs))
                + [_cell(sum(mean) / len(mean) if mean else None, 3)]
            )
    text = [
        f"Table 4: validation NLL by position within the window (b0..b{n_bins - 1}: mean NLL "
        f"in bins of position; first-last = b0 - b{n_bins - 1}, how much lower the loss is at "
        "the end of the window than at its start)",
        "",
        markdown_table(header, rows),
    ]
    if gaps:
        text += [
            "",
            "Gap between runs: this run's bin minus the first run's (the reference), per set and"
            " source; negative = lower loss than the reference. The paper's gap is linear W8 - "
            "fixed W8 on FineWeb-Edu.",
            "",
            markdown_table(
                ["runs", "source", "set", *(f"b{k}" for k in range(n_bins)), "mean"], gaps
            ),
        ]
    return "\n".join(text)


def tables(paths: Sequence[str | Path]) -> str:
    """Tables 1, 3 and 4 of the runs at ``paths`` (Markdown)."""
    records = [read_run(p) for p in paths]
    return "\n\n".join([table1(records), table3(records), table4(records)])


def list_runs() -> str:
    rows = [[run.name, f"configs/{run.config}", " ".join(run.overrides())] for run in RUNS.values()]
    return markdown_table(["name", "config", "overrides"], rows) + (
        f"\n\n{len(RUNS) - 1} sparse runs and dense; run one with: "
        "python -m lit_sparse matrix --run NAME [extra fit options]"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lit_sparse matrix",
        description=__doc__.split("\n\n")[0],
        epilog="With --run, options after NAME go to fit (e.g. --config configs/quickstart.yaml).",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--list", action="store_true", help="list the runs")
    group.add_argument("--run", metavar="NAME", help="launch one run (fit, in this process)")
    group.add_argument("--table", nargs="+", metavar="RUN_DIR", help="tables from run dirs")
    parser.add_argument("--dry-run", action="store_true", help="with --run: print the command")
    parser.add_argument("--out", default=None, help="with --table: also write this .md file")
    return parser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args, extra = _parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    if extra and not args.run:
        raise ConfigError(f"{extra[0]}: unknown option (extra options go with --run)")
    if args.list:
        print(list_runs())
        return 0
    if args.table:
        text = tables(args.table)
        print(text)
        if args.out:
            from lit_sparse.atomic_files import write_text

            write_text(args.out, text + "\n")
        return 0
    if args.run not in RUNS:
        raise ConfigError(f"--run {args.run}: not a run of the matrix; allowed: {', '.join(RUNS)}")
    run = RUNS[args.run]
    fit_args = run.fit_args(extra)
    print("python -m lit_sparse " + " ".join(fit_args), flush=True)
    if args.dry_run:
        return 0
    from lit_sparse.cli import main as lightning_main

    return lightning_main(fit_args)


if __name__ == "__main__":
    sys.exit(main())
