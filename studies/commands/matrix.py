"""``python -m lit_sparse matrix``: the paper's run matrix and its tables from run directories; the
seeded CPU-scale study (``--preset cpu``): its runs, tables over seeds and plots.

The library: :mod:`lit_sparse_studies.study` (``paper_matrix``, ``paper_tables``; the presets:
``preset``, ``runner``, what they print: ``reports``).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from lit_sparse import ConfigError, interrupted
from lit_sparse.commands import command
from lit_sparse.io import write_text
from lit_sparse_studies.study.paper_matrix import RUNS
from lit_sparse_studies.study.preset import check_record, preset_runs

__all__ = ["main", "matrix"]

FIT_PREFIXES = ("--model.", "--data.", "--trainer.", "--seed_everything", "--ckpt_path")
"""fit's options that ``--run`` passes on as they are (any other: after ``--``)."""


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
    if args.table:
        raise ConfigError(
            f"--table {args.table[0]}: with --preset, --table takes no RUN_DIR (the runs are "
            "under --root)"
        )


def _print(text: str, out: str | None = None) -> int:
    print(text)
    if out:
        write_text(out, text + "\n")
    return 0


def _preset_main(args: argparse.Namespace, extra: list[str]) -> int:
    from lit_sparse_studies.study import reports

    runs = preset_runs(args.preset, args.seeds, args.variants, args.root, args.tasks)
    results = None if args.results is None else Path(args.results)
    if args.list:
        return _print(reports.listing(runs, args.variants, args.tasks, args.root))
    if args.run is not None and args.dry_run:
        for run in runs:  # what --run refuses, --dry-run refuses
            check_record(run, extra)
        return _print("\n".join(reports.dry_run(runs, extra)))
    if args.run is not None:
        from lit_sparse_studies.study.runner import fit_in_subprocess, run_preset

        try:
            echo = functools.partial(print, flush=True)
            outcomes = run_preset(runs, fit_in_subprocess, extra, echo=echo, results=results)
        except KeyboardInterrupt:
            return interrupted(
                "the study stopped; the same command goes on (complete runs are skipped, "
                "interrupted ones resumed)"
            )
        _print(reports.outcome_table(outcomes))
        return 0 if all(o.code == 0 for o in outcomes) else 1
    if args.plot is not None:
        return _print("\n".join(map(str, reports.plots(runs, args.plot, results, note=_note))))
    return _print(reports.tables(runs, results, note=_note), args.out)


def _note(line: str) -> None:
    print(f"note: {line}", file=sys.stderr, flush=True)


@command("matrix", passes_on=FIT_PREFIXES, bare={"run": "", "table": [], "plot": ""})
def matrix(
    list: bool = False,
    run: str | None = None,
    table: list[str] | None = None,
    plot: str | None = None,
    preset: str | None = None,
    seeds: list[int] | None = None,
    variants: list[str] | None = None,
    tasks: list[str] | None = None,
    root: str | None = None,
    results: str | None = None,
    dry_run: bool = False,
    out: str | None = None,
    fit_config: list[str] | None = None,
    passed_on: list[str] | None = None,
) -> int:
    """The paper's run matrix and its tables from run directories; the seeded studies.

    One of --list, --run, --table, --plot. With --run, fit's options go on to fit: its config
    files as --fit_config FILE ..., --model.*, --data.*, --trainer.* and --seed_everything as
    they are, any other after --. With --preset, --list, --run, --table and --plot work on the
    preset's runs under --root (see README, 'The CPU-scale study').

        python -m lit_sparse matrix --list                                  # the paper's 22 runs
        python -m lit_sparse matrix --run fib_coprime_w8 --fit_config configs/quickstart.yaml
        python -m lit_sparse matrix --table runs/fib_fixed_w8 runs/fib_linear_w8   # Tables 1, 3, 4
        python -m lit_sparse matrix --preset cpu --seeds 0 1 2 --run        # skip complete, resume
        python -m lit_sparse matrix --preset recall --seeds 0 1 2 --table --out recall.md

    Args:
        list: list the runs (with --preset: status)
        run: launch one run NAME of the paper's matrix (fit, as its own process); with
            --preset, no NAME: every run of the preset, skipping complete ones, resuming
            interrupted ones and those another --run trains
        table: tables from RUN_DIRs; with --preset, no RUN_DIR: the tables over seeds
        plot: with --preset: write the study's PNG plots into DIR (default <root>/plots)
        preset: a preset: cpu, recall
        seeds: with --preset: seeds (default 0 1 2)
        variants: with --preset: only these variants
        tasks: with --preset recall: only these tasks (default: every default task; mqar256
            runs only when named)
        root: with --preset: folder of the runs (default runs/<preset>)
        results: with --preset: --run writes each finished run's record in this DIR
            ([<task>/]<variant>/seed<K>.json, small enough to commit); --table and --plot read
            the records here instead of the run folders (docs/recall-study/results,
            docs/cpu-study/results)
        dry_run: with --run: print the commands
        out: with --table: also write this .md file
        fit_config: with --run: fit's config files (its --config), layered in order
        passed_on: with --run: fit's further options
    """
    actions = {"--list": list or None, "--run": run, "--table": table, "--plot": plot}
    given = [name for name, value in actions.items() if value is not None]
    if len(given) != 1:
        shown = " and ".join(given) or "no action"
        raise ConfigError(f"{shown}: give one of --list, --run, --table, --plot")
    extra = [word for path in fit_config or () for word in ("--config", path)]
    extra += passed_on or []
    args = argparse.Namespace(
        list=list, run=run, table=table, plot=plot, preset=preset, seeds=seeds,
        variants=variants, tasks=tasks, root=root, results=results, dry_run=dry_run, out=out,
    )  # fmt: skip
    _check_options(args, extra)
    if args.preset is not None:
        return _preset_main(args, extra)
    if args.list:
        from lit_sparse_studies.study.paper_tables import list_runs

        return _print(list_runs())
    if args.table:
        from lit_sparse_studies.study.paper_tables import tables

        return _print(tables(args.table), args.out)
    if args.run not in RUNS:
        raise ConfigError(f"--run {args.run}: not a run of the matrix; allowed: {', '.join(RUNS)}")
    fit_args = RUNS[args.run].fit_args(extra)
    print("python -m lit_sparse " + " ".join(fit_args), flush=True)
    if args.dry_run:
        return 0
    from lit_sparse_studies.study.runner import fit_in_subprocess

    return fit_in_subprocess(fit_args)


main = matrix  # the entry point's target
