"""The retrieval-probe grid (paper table 2): each cell trained as a run and scored, the tables.

A cell is a depth, a start (``uniform`` or ``staggered`` learned alpha), a seed and a rung
read (``interpolate``, or ``gaussian``: the paper's blur with its width annealed from 40 to
0.5 over the first 80 % of steps): the config ``configs/probe/depth<D>_<init>.yaml`` with the
seed (``seed_everything`` and ``data.seed``) and the read as overrides, trained through fit's
run handling (:func:`lit_sparse.runs.trainer.run_trainer`: the run folder
``<out>/depth<D>_<init>_<read>/seed<S>`` locked while it trains, ``last.ckpt`` written
atomically) and scored on the held-out sequences (:mod:`lit_sparse.tasks.probe` defines
acc@d).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lit_sparse import ConfigError, LitSparseError
from lit_sparse.io import markdown_table
from lit_sparse_studies.study.paper_matrix import CONFIG_DIR as CONFIGS

__all__ = ["PAPER_TABLE2", "ProbeRun", "probe_parser", "probe_tables", "run_grid", "run_probe"]

CONFIG_DIR = CONFIGS / "probe"
INITS = ("uniform", "staggered")
READS = ("interpolate", "gaussian")
MIN_SEQUENCES = 64

PAPER_TABLE2 = {
    (2, "uniform"): ((0.93, 1.03), 0.38, 0.23),
    (2, "staggered"): ((0.56, 1.39), 0.99, 0.00),
    (4, "uniform"): ((0.96, 1.01), 0.0, 0.0),
    (4, "staggered"): ((0.55, 1.45), 0.88, 0.17),
    (8, "uniform"): ((0.97, 1.02), 0.0, 0.0),
    (8, "staggered"): ((0.55, 1.45), 0.04, 0.0),
}
"""(depth, init) -> (learned alpha range, acc@200, acc@350) of the paper's table 2
(docs/paper.md section 6; Gaussian rung read, 2 sequences scored)."""


@dataclass
class ProbeRun:
    """One trained cell of the grid and its scores."""

    depth: int
    init: str
    read: str
    seed: int
    steps: int
    seconds: float
    scores: Any  # lit_sparse.tasks.ProbeScores
    log_dir: str

    @property
    def key(self) -> tuple[int, str, str]:
        return (self.depth, self.init, self.read)

    def as_dict(self) -> dict[str, Any]:
        return {
            **{name: getattr(self, name) for name in ("depth", "init", "read", "seed", "steps")},
            "seconds": self.seconds,
            "seconds_per_step": self.seconds / max(1, self.steps),
            "log_dir": self.log_dir,
            **self.scores.as_dict(),
        }


def probe_parser():
    """The jsonargparse parser of a probe config: model (ProbeModule), data
    (ProbeDataModule), trainer (Trainer keyword arguments), seed_everything."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    from lit_sparse.tasks import ProbeDataModule, ProbeModule

    parser = ArgumentParser(exit_on_error=False, default_env=False)
    parser.add_argument("--config", action=ActionConfigFile)
    parser.add_argument("--seed_everything", type=int, default=0)
    parser.add_argument("--trainer", type=dict[str, Any], default={})
    parser.add_class_arguments(ProbeModule, "model")
    parser.add_class_arguments(ProbeDataModule, "data")
    parser.link_arguments("data.seq_len", "model.arch.context_length")
    parser.link_arguments(
        ("data.payload", "data.distances"),
        "model.arch.vocab_size",
        compute_fn=lambda payload, distances: ProbeDataModule.model_vocab_size(payload, distances),
    )
    return parser


def config_path(config_dir: Path, depth: int, init: str) -> Path:
    path = Path(config_dir) / f"depth{depth}_{init}.yaml"
    if not path.is_file():
        found = sorted(p.stem for p in Path(config_dir).glob("depth*_*.yaml"))
        raise ConfigError(
            f"--depths {depth} --inits {init}: no config {path}; available: "
            + (", ".join(found) or "none")
        )
    return path


def run_probe(
    depth: int,
    init: str,
    seed: int,
    read: str,
    steps: int | None = None,
    out: str | Path = "runs/probe",
    config_dir: str | Path = CONFIG_DIR,
    val_sequences: int | None = None,
    progress_bar: bool = True,
    overrides: list[str] | None = None,
) -> ProbeRun:
    """Train one probe cell and score it on the held-out sequences."""
    import lightning.pytorch as pl
    from lightning.pytorch.loggers import TensorBoardLogger

    from lit_sparse.io import write_json
    from lit_sparse.parsing import condense_parse_error
    from lit_sparse.runs import run_trainer

    parser = probe_parser()
    args = ["--config", str(config_path(Path(config_dir), depth, init))]
    args += ["--seed_everything", str(seed), "--data.seed", str(seed)]
    args += ["--model.attention.init_args.schedule.read", read]
    if val_sequences is not None:
        args += ["--data.val_sequences", str(val_sequences)]
    args += list(overrides or [])
    try:
        cfg = parser.parse_args(args)
    except Exception as err:
        if isinstance(err, LitSparseError):
            raise
        raise ConfigError(condense_parse_error(str(err))) from None
    trainer_args = dict(cfg.trainer)
    steps = int(trainer_args.get("max_steps", 2500) if steps is None else steps)
    if steps < 1:
        raise ConfigError(f"--steps={steps}: expected an integer >= 1")
    if cfg.data.val_sequences < MIN_SEQUENCES:
        raise ConfigError(
            f"data.val_sequences={cfg.data.val_sequences}: accuracy needs at least "
            f"{MIN_SEQUENCES} held-out sequences"
        )
    cfg.model.max_steps = steps
    pl.seed_everything(cfg.seed_everything, verbose=False)  # before the model is built
    init_objects = parser.instantiate(cfg)
    module, datamodule = init_objects.model, init_objects.data
    interval = trainer_args.pop("val_check_interval", None)
    interval = interval if interval and interval < steps else steps
    trainer_args.update(
        max_steps=steps,
        val_check_interval=interval,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        enable_model_summary=False,
        enable_progress_bar=progress_bar,
    )
    trainer_args.setdefault("log_every_n_steps", min(25, steps))
    logger = TensorBoardLogger(str(out), name=f"depth{depth}_{init}_{read}", version=f"seed{seed}")
    with run_trainer(logger, "probe", checkpoint_every=interval, **trainer_args) as trainer:
        start = time.perf_counter()
        trainer.fit(module, datamodule=datamodule)
        seconds = time.perf_counter() - start
        if module.scores is None or module.scores.step != trainer.global_step:
            trainer.validate(module, datamodule=datamodule, verbose=False)
        run = ProbeRun(depth, init, read, seed, steps, seconds, module.scores, trainer.log_dir)
        write_json(Path(trainer.log_dir) / "probe.json", _finite(run.as_dict()))
    return run


def run_grid(
    depths: Sequence[int],
    inits: Sequence[str],
    seeds: Sequence[int],
    reads: Sequence[str],
    out: str | Path = "runs/probe",
    echo: Callable[[str], None] = print,
    **options: Any,
) -> list[ProbeRun]:
    """Train every cell (depth, init, read, then seed) with :func:`run_probe` and its
    ``options``, after checking that every config exists; ``probe_table.md`` and
    ``probe_table.json`` in ``out`` are rewritten after each cell, and ``echo`` hears the
    progress."""
    cells = [(d, i, s, r) for d in depths for i in inits for r in reads for s in seeds]
    config_dir = Path(options.get("config_dir", CONFIG_DIR))
    for depth, init, _, _ in cells:  # every config exists before anything trains
        config_path(config_dir, depth, init)
    steps, val_sequences = options.get("steps"), options.get("val_sequences")
    if steps is not None and steps < 1:
        raise ConfigError(f"--steps={steps}: expected an integer >= 1")
    if val_sequences is not None and val_sequences < MIN_SEQUENCES:
        raise ConfigError(f"--val-sequences={val_sequences}: expected >= {MIN_SEQUENCES}")
    runs: list[ProbeRun] = []
    started, out = time.perf_counter(), Path(out)
    for index, (depth, init, seed, read) in enumerate(cells, start=1):
        echo(f"run {index}/{len(cells)}: depth {depth}, {init} start, {read} read, seed {seed}")
        run = run_probe(depth, init, seed, read, out=out, **options)
        runs.append(run)
        left = (time.perf_counter() - started) / index * (len(cells) - index)
        accs = ", ".join(f"acc@{d} {a:.3f}" for d, a in run.scores.accuracy.items())
        echo(
            f"run {index}/{len(cells)} done in {run.seconds:.0f} s "
            f"({run.seconds / run.steps:.2f} s/step): alpha {_range(run.scores.alpha_range)}, "
            f"{accs} on {run.scores.sequences} sequences; about {left / 60:.0f} min left"
        )
        _write_tables(out, runs)
    return runs


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _range(values: tuple[float, float] | None) -> str:
    return "-" if values is None else f"{values[0]:.2f}-{values[1]:.2f}"


def probe_tables(runs: list[ProbeRun]) -> str:
    """Markdown: one row per run, then the mean over seeds beside the paper's table 2."""
    if not runs:
        return "no runs"
    distances = list(runs[0].scores.accuracy)
    acc_cols = [f"acc@{d}" for d in distances]
    per_run = [
        [str(r.depth), r.init, r.read, str(r.seed), str(r.steps), _range(r.scores.alpha_range)]
        + [f"{r.scores.accuracy[d]:.3f}" for d in distances]
        + [str(r.scores.sequences), f"{r.seconds:.0f}", f"{r.seconds / max(1, r.steps):.2f}"]
        for r in runs
    ]
    header = ["depth", "init", "read", "seed", "steps", "alpha range", *acc_cols, "sequences"]
    text = ["Runs (alpha range: min-max over layers after training):", ""]
    text.append(markdown_table([*header, "s", "s/step"], per_run))
    groups: dict[tuple[int, str, str], list[ProbeRun]] = {}
    for r in runs:
        groups.setdefault(r.key, []).append(r)
    summary = []
    for (depth, init, read), members in groups.items():
        ranges = [m.scores.alpha_range for m in members if m.scores.alpha_range]
        span = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None
        means = [sum(m.scores.accuracy[d] for m in members) / len(members) for d in distances]
        paper = PAPER_TABLE2.get((depth, init)) if distances == [200, 350] else None
        paper_cells = (
            [_range(paper[0]), f"{paper[1]:.2f}", f"{paper[2]:.2f}"] if paper else ["-"] * 3
        )
        seeds = " ".join(str(m.seed) for m in members)
        summary.append([str(depth), init, read, seeds, _range(span)])
        summary[-1] += [*(f"{m:.3f}" for m in means), *paper_cells]
    text += ["", "Mean over seeds (alpha range over seeds and layers) and the paper's table 2", ""]
    text.append(
        markdown_table(
            ["depth", "init", "read", "seeds", "alpha range", *acc_cols]
            + ["paper alpha range", "paper acc@200", "paper acc@350"],
            summary,
        )
    )
    text += [
        "",
        "acc@d: share of held-out positions whose token's marker selects distance d (and t >= d)"
        " where the argmax prediction is the token d positions back. The paper's numbers used "
        "the Gaussian rung read and scored 2 sequences; chance is 1/512.",
    ]
    return "\n".join(text)


def _write_tables(out: Path, runs: list[ProbeRun]) -> None:
    from lit_sparse.io import write_json, write_text

    write_text(out / "probe_table.md", probe_tables(runs) + "\n")
    write_json(out / "probe_table.json", _finite([r.as_dict() for r in runs]))
