"""``python -m lit_sparse probe``: train the retrieval-probe grid and print paper table 2.

Each cell of ``--depths x --inits x --seeds x --reads`` trains the config
``configs/probe/depth<D>_<init>.yaml`` (learned alpha, uniform or staggered start) with the
seed (``seed_everything`` and ``data.seed``) and the rung read (``interpolate``, or
``gaussian``: the paper's blur with its width annealed from 40 to 0.5 over the first 80 %
of steps) as overrides, then scores it on the held-out sequences (64 by default; see
:mod:`lit_sparse.evaluation.probe` for the definition of acc@d). It prints one row per run
(learned alpha range at the end, acc@200, acc@350, sequences scored, seconds), then the mean
over seeds beside the paper's numbers (which used the Gaussian read), and writes
``probe_table.md`` / ``probe_table.json`` to ``--out`` (each run's TensorBoard logs,
``checkpoints/last.ckpt`` and ``probe.json`` go to ``<out>/depth<D>_<init>_<read>/seed<S>/``).

    python -m lit_sparse probe --depths 2 4 8 --inits uniform staggered --seeds 0 1
    python -m lit_sparse probe --depths 2 --inits staggered --seeds 0 --reads gaussian --steps 500
"""

from __future__ import annotations

import argparse
import sys

from lit_sparse.commands import argparse_parser, parse_options, reports_errors
from lit_sparse.errors import ConfigError
from lit_sparse_studies.study.probe import CONFIG_DIR, INITS, READS, probe_tables, run_grid

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse_parser("probe", __doc__.split("\n\n")[1])
    parser.add_argument("--depths", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--inits", nargs="+", choices=INITS, default=list(INITS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--reads", nargs="+", choices=READS, default=list(READS))
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: 2500)")
    parser.add_argument("--val-sequences", type=int, default=None, help="held-out (>= 64)")
    parser.add_argument("--out", default="runs/probe", help="folder of the runs and the table")
    parser.add_argument("--config-dir", default=str(CONFIG_DIR), help="the probe configs")
    parser.add_argument("--no-progress", action="store_true", help="no per-run progress bar")
    return parser


def _progress(message: str) -> None:
    print(f"[probe] {message}", file=sys.stderr, flush=True)


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args, overrides = parse_options(_parser(), argv, known=True)
    bad = [o for o in overrides if o.startswith("--") and not o.startswith(("--model.", "--data."))]
    if bad:
        raise ConfigError(f"{bad[0]}: unknown option (see --help)")
    runs = run_grid(
        args.depths,
        args.inits,
        args.seeds,
        args.reads,
        out=args.out,
        echo=_progress,
        steps=args.steps,
        config_dir=args.config_dir,
        val_sequences=args.val_sequences,
        progress_bar=not args.no_progress,
        overrides=overrides,
    )
    print(probe_tables(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
