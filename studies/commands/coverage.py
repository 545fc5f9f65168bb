"""``python -m lit_sparse coverage``: which distances a model's attention reaches.

For the model of ``--config`` files (read offline, nothing built but the attention
patterns) at length T (default: the training length), prints each layer's attended
distances (a learned alpha at its starting value), their union over layers, how many lie
beyond the window W, and with ``--hops 2`` the distances reachable by composing a layer with
any later one (the residual stream carries a layer's output to every later layer; distance 0
is in every layer, so single hops are included; the reach stops at T - 1).

    python -m lit_sparse coverage --config configs/fixed.yaml             # 19 distances
    python -m lit_sparse coverage --config configs/staggered.yaml         # union: 133
    python -m lit_sparse coverage --config configs/coprime.yaml --hops 2 --length 4096
    python -m lit_sparse coverage --config configs/fixed.yaml --model.attention.init_args.window 12

Options after the known ones are ``--model.<key> VALUE`` / ``--data.<key> VALUE`` overrides.
"""

from __future__ import annotations

import argparse
import sys

from lit_sparse.commands import config_parser, parse_options, print_report, reports_errors
from lit_sparse.parsing.config_files import read_model_config
from lit_sparse_studies.study.coverage import compute_coverage

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = config_parser("coverage", __doc__.split("\n\n")[1])
    parser.add_argument("--hops", type=int, choices=(1, 2), default=1, help="2: compose layers")
    return parser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args, overrides = parse_options(_parser(), argv, known=True)
    coverage = compute_coverage(read_model_config(args.config, overrides), args.length, args.hops)
    return print_report(coverage, args.json)


if __name__ == "__main__":
    sys.exit(main())
