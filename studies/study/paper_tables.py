"""The paper's Tables 1, 3 and 4 from run folders (Markdown), with the paper's numbers beside
a run whose attention is one of the matrix's runs.

Table 1 is held-out perplexity per set (the last ``val/ppl/<set>`` in the TensorBoard events),
Table 3 length extrapolation (``extrapolation.json``), Table 4 position-binned loss
(``position_loss.json``); a run's "setup" column says whether its model, data and steps are
the paper's too, i.e. whether the numbers are comparable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lit_sparse import ConfigError
from lit_sparse.io import load_yaml, markdown_table
from lit_sparse.runs import read_scalars
from lit_sparse_studies.study.paper_matrix import PAPER, PAPER_ARCH, PAPER_SETS, RUNS, identify
from lit_sparse_studies.study.seeds import lookup

__all__ = ["RunRecord", "list_runs", "read_run", "table1", "table3", "table4", "tables"]


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
    arch = lookup(config, "model.arch") or {}
    seq_len, steps = lookup(config, "data.init_args.seq_len"), lookup(config, "trainer.max_steps")
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
    values, step = {}, None
    for tag, series in read_scalars(run_dir, prefix).items():
        if "/" not in tag[len(prefix) :]:
            last = max(series)
            values[tag[len(prefix) :]] = series[last]
            step = last if step is None else max(step, last)
    return values, step


def read_run(path: str | Path) -> RunRecord:
    """Read a run directory (or an experiment folder: its newest version)."""
    from lit_sparse.runs import read_extrapolation, read_result_json, resolve_run_dir

    run_dir = resolve_run_dir(Path(path))
    if not run_dir.is_dir():
        raise ConfigError(f"RUN_DIR {path}: no such directory")
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
    title = "Table 1: held-out perplexity per set (ours: the last val/ppl/<set> logged)"
    return f"{title}\n\n{markdown_table(['run', 'source', 'setup', 'step', *columns], rows)}"


def table3(records: Sequence[RunRecord]) -> str:
    """Perplexity at 1x, 2x and 4x the training length (the paper's Table 3)."""
    rows = []
    for record in records:
        result = record.extrapolation
        for name in result.sets if result is not None else []:
            values = {t: result.ppl(name, t) for t in result.lengths}
            change = result.change_pct(name, result.lengths[-1])
            rows.append(_row3([record.label, _ours(record), record.setup], name, values, change))
        paper = PAPER.get(record.matrix_name or "", {}).get("extrap") or {}
        for name, by_length in paper.items():
            values = list(by_length.values())
            change = 100 * (values[-1] / values[0] - 1)
            rows.append(_row3([record.label, "paper", "paper"], name, by_length, change))
    if not rows:
        return "Table 3: length extrapolation: no extrapolation.json in these runs"
    header = ["run", "source", "setup", "set", "lengths", "perplexity", "change %"]
    return (
        "Table 3: perplexity at the training length and beyond (change: the longest length "
        f"against the training length, %)\n\n{markdown_table(header, rows)}"
    )


def _row3(labels: list[str], name: str, ppl: dict[int, float], change: float) -> list[str]:
    """A Table 3 row: ``labels``, the set, its lengths, the perplexity at each, the change."""
    cells = ["/".join(map(str, ppl)), " / ".join(_cell(v) for v in ppl.values())]
    return [*labels, name, *cells, _cell(change, 1)]


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
    """The matrix's runs, their configs and options (``matrix --list``)."""
    rows = [[run.name, f"configs/{run.config}", " ".join(run.overrides())] for run in RUNS.values()]
    return markdown_table(["name", "config", "overrides"], rows) + (
        f"\n\n{len(RUNS) - 1} sparse runs and dense; run one with: "
        "python -m lit_sparse matrix --run NAME [extra fit options]"
    )
