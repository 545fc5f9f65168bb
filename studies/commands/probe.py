"""``python -m lit_sparse probe``: train the retrieval-probe grid and print paper table 2."""

from __future__ import annotations

import sys
from typing import Literal

from lit_sparse.commands import command
from lit_sparse_studies.study.probe import CONFIG_DIR, INITS, READS, probe_tables, run_grid

__all__ = ["main", "probe"]

Init = Literal[INITS]  # type: ignore[valid-type]
Read = Literal[READS]  # type: ignore[valid-type]


def _progress(message: str) -> None:
    print(f"[probe] {message}", file=sys.stderr, flush=True)


@command("probe", passes_on=("--model.", "--data."))
def probe(
    depths: list[int] = [2, 4, 8],  # noqa: B006 (never changed)
    inits: list[Init] = list(INITS),  # noqa: B006, B008
    seeds: list[int] = [0, 1],  # noqa: B006
    reads: list[Read] = list(READS),  # noqa: B006, B008
    steps: int | None = None,
    val_sequences: int | None = None,
    out: str = "runs/probe",
    config_dir: str = str(CONFIG_DIR),
    no_progress: bool = False,
    passed_on: list[str] | None = None,
) -> int:
    """Train the retrieval-probe grid and print paper table 2.

    Each cell of ``--depths x --inits x --seeds x --reads`` trains the config
    ``configs/probe/depth<D>_<init>.yaml`` (learned alpha, uniform or staggered start) with the
    seed (``seed_everything`` and ``data.seed``) and the rung read (``interpolate``, or
    ``gaussian``: the paper's blur with its width annealed from 40 to 0.5 over the first 80 %
    of steps) as overrides, then scores it on the held-out sequences (64 by default; see
    :mod:`lit_sparse.tasks.probe` for the definition of acc@d). It prints one row per run
    (learned alpha range at the end, acc@200, acc@350, sequences scored, seconds), then the mean
    over seeds beside the paper's numbers (which used the Gaussian read), and writes
    ``probe_table.md`` / ``probe_table.json`` to ``--out`` (each run's TensorBoard logs,
    ``checkpoints/last.ckpt`` and ``probe.json`` go to ``<out>/depth<D>_<init>_<read>/seed<S>/``).

        python -m lit_sparse probe --depths 2 4 8 --inits uniform staggered --seeds 0 1
        python -m lit_sparse probe --depths 2 --inits staggered --seeds 0 --reads gaussian \\
            --steps 500

    Args:
        depths: the probe models' depths
        inits: the learned alpha's start
        seeds: seeds of each cell
        reads: the rung reads
        steps: steps per run (default: 2500)
        val_sequences: held-out sequences (>= 64)
        out: folder of the runs and the table
        config_dir: the probe configs
        no_progress: no per-run progress bar
        passed_on: --model.<key> VALUE and --data.<key> VALUE overrides of every run
    """
    runs = run_grid(
        depths,
        inits,
        seeds,
        reads,
        out=out,
        echo=_progress,
        steps=steps,
        config_dir=config_dir,
        val_sequences=val_sequences,
        progress_bar=not no_progress,
        overrides=passed_on or [],
    )
    print(probe_tables(runs))
    return 0


main = probe  # the entry point's target
