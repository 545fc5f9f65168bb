"""``python -m lit_sparse flops``: forward FLOPs per token, by term, dense against sparse.

For the model of ``--config`` files (read offline) at length T (default: the training
length), prints the forward FLOPs per predicted token split into attention scores,
attention mixing, projections, MLP and LM head, for the dense model of the same shape and
for the config's attention, with the keys per query each layer computes. The counts are
:func:`lit_sparse.evaluation.forward_flops_per_token` (the function the
``SparseThroughputMonitor`` uses; a training step is 3x forward): multiply-adds count 2,
element-wise work is not counted, dense counts the full T x T score matrix (as SDPA's math
path and torch's flop counter do; flash kernels skip about half of it). The dense total is
checked against Lightning's ``measure_flops`` (torch's FlopCounterMode on the meta device).

    python -m lit_sparse flops --config configs/fixed.yaml
    python -m lit_sparse flops --config configs/staggered.yaml --length 4096
"""

from __future__ import annotations

import argparse
import sys

from lit_sparse.commands import config_parser, parse_options, print_report, reports_errors
from lit_sparse.parsing.config_files import read_model_config
from lit_sparse_studies.study.flops import flops_report

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = config_parser("flops", __doc__.split("\n\n")[1])
    parser.add_argument(
        "--no-check", action="store_true", help="skip the measure_flops check of dense"
    )
    return parser


@reports_errors
def main(argv: list[str] | None = None) -> int:
    args, overrides = parse_options(_parser(), argv, known=True)
    config = read_model_config(args.config, overrides)
    return print_report(flops_report(config, args.length, check=not args.no_check), args.json)


if __name__ == "__main__":
    sys.exit(main())
