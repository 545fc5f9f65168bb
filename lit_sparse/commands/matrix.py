"""``python -m lit_sparse matrix``: the paper's run matrix and its tables from run directories; the
seeded CPU-scale study (``--preset cpu``): its runs, tables over seeds and plots.

The matrix (docs/paper.md section 4): W in {6, 8, 10, 12} for fib fixed, fib learned, fib
linear, fib coprime and pow2 linear (20 runs), pow2 fixed at W=8 (21 sparse runs), and dense.

    python -m lit_sparse matrix --list
    python -m lit_sparse matrix --run fib_linear_w12                    # the paper's recipe
    python -m lit_sparse matrix --run fib_coprime_w8 --config configs/quickstart.yaml
    python -m lit_sparse matrix --table runs/fib_fixed_w8 runs/fib_linear_w8

``--run NAME [overrides]`` runs ``python -m lit_sparse fit --config <config>
--model.attention.init_args.window W --trainer.logger.init_args.name NAME [overrides]`` as
its own process, so the run lands in ``<save_dir>/NAME/version_N`` (``runs/NAME/...``; with the
quickstart config ``runs/quickstart/NAME/...``). ``--table RUN_DIR...`` rebuilds the paper's
Table 1 (held-out perplexity per set: the last ``val/ppl/<set>`` in the TensorBoard events),
Table 3 (length extrapolation: ``extrapolation.json``) and Table 4 (position-binned loss:
``position_loss.json``) as Markdown, with the paper's numbers beside a run whose attention
is one of the matrix's runs (its "setup" column says whether the model, data and steps are
the paper's too, i.e. whether the numbers are comparable).

``--preset cpu`` works on the seeded CPU-scale study instead (:mod:`lit_sparse.study`):

    python -m lit_sparse matrix --preset cpu --seeds 0 1 2 --list    # runs and their status
    python -m lit_sparse matrix --preset cpu --seeds 0 1 2 --run     # skip complete, resume
    python -m lit_sparse matrix --preset cpu --seeds 0 1 2 --table --out study.md
    python -m lit_sparse matrix --preset cpu --seeds 0 1 2 --plot    # <root>/plots/*.png

``--run`` trains each run as its own process (``python -m lit_sparse fit ...``): a crash or
a kill of one run is reported and the study goes on. Each run is claimed while it trains,
so several ``--run`` on one root share the work: each skips the runs another one holds.

``--preset recall`` is the recall study (docs/recall-study.md): MQAR, the distance task and
passkey, each a task (``--tasks mqar64 distance`` runs some of them):

    python -m lit_sparse matrix --preset recall --seeds 0 1 2 --run
    python -m lit_sparse matrix --preset recall --seeds 0 1 2 --table --out recall.md
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lit_sparse.commands import reports_errors
from lit_sparse.errors import ConfigError, interrupted
from lit_sparse.io.tables import markdown_table
from lit_sparse.io.yaml_files import load_yaml
from lit_sparse.parsing.help_text import HelpFormatter
from lit_sparse.study.paper_matrix import (
    PAPER,
    PAPER_ARCH,
    PAPER_SETS,
    RUNS,
    MatrixRun,
    identify,
)
from lit_sparse.study.preset import PRESETS, get_preset

__all__ = ["PAPER", "RUNS", "MatrixRun", "RunRecord", "identify", "main", "read_run", "tables"]


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
    from lit_sparse.runs.analysis import read_extrapolation, read_result_json, resolve_run_dir

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
        formatter_class=HelpFormatter,
        prog="python -m lit_sparse matrix",
        description=__doc__.split("\n\n")[0],
        epilog="With --run, further options go to fit (e.g. --config configs/quickstart.yaml). "
        "With --preset, --list, --run, --table and --plot work on the preset's runs under "
        "--root (see README, 'The CPU-scale study').",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--list", action="store_true", help="list the runs (with --preset: status)")
    group.add_argument(
        "--run",
        nargs="?",
        const="",
        metavar="NAME",
        help="launch one run of the paper's matrix (fit, as its own process); with --preset, "
        "no NAME: every run of the preset, skipping complete ones, resuming interrupted ones "
        "and those another --run trains",
    )
    group.add_argument(
        "--table",
        nargs="*",
        metavar="RUN_DIR",
        help="tables from run dirs; with --preset, no RUN_DIR: the tables over seeds",
    )
    group.add_argument(
        "--plot",
        nargs="?",
        const="",
        metavar="DIR",
        help="with --preset: write the study's PNG plots into DIR (default <root>/plots)",
    )
    parser.add_argument("--preset", default=None, help=f"a preset: {', '.join(PRESETS)}")
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="with --preset: seeds (default 0 1 2)"
    )
    parser.add_argument(
        "--variants", nargs="+", default=None, help="with --preset: only these variants"
    )
    parser.add_argument(
        "--tasks",
        nargs="+",
        default=None,
        help="with --preset recall: only these tasks (default: every default task; "
        "mqar256 runs only when named)",
    )
    parser.add_argument(
        "--root", default=None, help="with --preset: folder of the runs (default runs/<preset>)"
    )
    parser.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="with --preset recall: --run writes each finished run's record here "
        "(<task>/<variant>/seed<K>.json, small enough to commit); --table and --plot read "
        "the records here instead of the run folders (docs/recall-study/results)",
    )
    parser.add_argument("--dry-run", action="store_true", help="with --run: print the commands")
    parser.add_argument("--out", default=None, help="with --table: also write this .md file")
    return parser


def _check_options(args: argparse.Namespace, extra: list[str]) -> None:
    if extra and args.run is None:
        raise ConfigError(f"{extra[0]}: unknown option (extra options go with --run)")
    if args.preset is None:
        for name in ("seeds", "variants", "root", "tasks", "results"):
            if getattr(args, name) is not None:
                raise ConfigError(f"--{name}: only with --preset (e.g. --preset cpu)")
        if args.plot is not None:
            raise ConfigError("--plot: only with --preset (e.g. --preset cpu --plot)")
        if args.run == "":
            raise ConfigError("--run: expected a run NAME of the matrix (or --preset cpu --run)")
        if args.table == []:
            raise ConfigError("--table: expected RUN_DIR... (or --preset cpu --table)")
        return
    if args.run:
        raise ConfigError(
            f"--run {args.run}: with --preset, --run takes no name (--variants and --seeds "
            "choose the runs)"
        )
    if args.results is not None and get_preset(args.preset).measures != "recall":
        raise ConfigError(f"--results {args.results}: only with --preset recall")
    if args.table:
        raise ConfigError(
            f"--table {args.table[0]}: with --preset, --table takes no RUN_DIR (the runs are "
            "under --root)"
        )


def _run_command(args: argparse.Namespace, runs: list) -> str:
    """The command that runs the listed runs: the preset, seeds, variants, tasks and root."""
    words = ["--preset", args.preset, "--seeds"]
    words += [str(seed) for seed in dict.fromkeys(run.seed for run in runs)]
    for name in ("variants", "tasks"):
        if getattr(args, name):
            words += [f"--{name}", *getattr(args, name)]
    if args.root is not None:
        words += ["--root", args.root]
    return f"python -m lit_sparse matrix {shlex.join(words)} --run"


def _preset_main(args: argparse.Namespace, extra: list[str]) -> int:
    from lit_sparse.study.preset import RunState, preset_runs, run_status

    runs = preset_runs(args.preset, args.seeds, args.variants, args.root, args.tasks)
    if args.list:
        rows, states = [], []
        for run in runs:
            status = run_status(run)
            states.append(status.state.value)
            configs = f"configs/{run.variant.config} configs/{run.setup.config}"
            where = status.run_dir or run.experiment
            options = run.variant.task_options(run.setup) + run.variant.seed_overrides(run.seed)
            state = status.state.value
            if status.state is RunState.COMPLETE:
                state += f" ({status.detail})"
            rows.append([run.name, configs, " ".join(options), state, str(where)])
        counts = ", ".join(f"{states.count(s)} {s}" for s in dict.fromkeys(states))
        print(markdown_table(["run", "configs", "options", "status", "folder"], rows))
        print(
            f"\n{len(runs)} runs: {counts}. Run them (skips complete runs, resumes "
            f"interrupted ones): {_run_command(args, runs)}"
        )
        return 0
    if args.run is not None:
        if args.dry_run:  # what --run would do, run by run
            for run in runs:
                status = run_status(run)
                if status.state is RunState.COMPLETE:
                    print(f"# {run.name}: complete ({status.run_dir}), skipped")
                    continue
                resume = status.state is RunState.INTERRUPTED
                print("python -m lit_sparse " + " ".join(run.fit_args(extra, resume=resume)))
            return 0
        from lit_sparse.study.runner import fit_in_subprocess, run_preset

        try:
            outcomes = run_preset(
                runs,
                fit_in_subprocess,
                extra,
                echo=lambda s: print(s, flush=True),
                results=None if args.results is None else Path(args.results),
            )
        except KeyboardInterrupt:
            return interrupted(
                "the study stopped; the same command goes on (complete runs are skipped, "
                "interrupted ones resumed)"
            )
        rows = [[o.run.name, o.action, o.result, f"{o.seconds:.0f}"] for o in outcomes]
        print(markdown_table(["run", "action", "result", "seconds"], rows))
        return 0 if all(o.code == 0 for o in outcomes) else 1
    if runs[0].preset.measures == "recall":
        return _recall_report(args, runs)
    from lit_sparse.study.seeds import collect

    results = collect(runs)
    if args.plot is not None:
        from lit_sparse.study.plots import write_plots

        folder = Path(args.plot) if args.plot else runs[0].root / "plots"
        for path in write_plots(results, folder):
            print(path)
        return 0
    from lit_sparse.study.report import study_tables

    text = study_tables(results)
    print(text)
    if args.out:
        from lit_sparse.io.atomic import write_text

        write_text(args.out, text + "\n")
    return 0


def _recall_report(args: argparse.Namespace, runs: list) -> int:
    """--table or --plot of the recall preset."""
    from lit_sparse.study.recall_results import collect_recall

    study = collect_recall(runs, None if args.results is None else Path(args.results))
    if args.plot is not None:
        from lit_sparse.study.recall_plots import write_recall_plots

        folder = Path(args.plot) if args.plot else runs[0].root / "plots"
        for path in write_recall_plots(study, folder):
            print(path)
        return 0
    from lit_sparse.study.recall_report import recall_tables

    text = recall_tables(study)
    print(text)
    if args.out:
        from lit_sparse.io.atomic import write_text

        write_text(args.out, text + "\n")
    return 0


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args, extra = _parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    _check_options(args, extra)
    if args.preset is not None:
        return _preset_main(args, extra)
    if args.list:
        print(list_runs())
        return 0
    if args.table:
        text = tables(args.table)
        print(text)
        if args.out:
            from lit_sparse.io.atomic import write_text

            write_text(args.out, text + "\n")
        return 0
    if args.run not in RUNS:
        raise ConfigError(f"--run {args.run}: not a run of the matrix; allowed: {', '.join(RUNS)}")
    run = RUNS[args.run]
    fit_args = run.fit_args(extra)
    print("python -m lit_sparse " + " ".join(fit_args), flush=True)
    if args.dry_run:
        return 0
    from lit_sparse.study.runner import fit_in_subprocess

    return fit_in_subprocess(fit_args)


if __name__ == "__main__":
    sys.exit(main())
