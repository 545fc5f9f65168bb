"""``python -m lit_sparse coverage``: which distances a model's attention reaches."""

from __future__ import annotations

from typing import Literal

from lit_sparse.commands import command, print_report
from lit_sparse.parsing import read_model_config
from lit_sparse_studies.study.coverage import compute_coverage

__all__ = ["coverage", "main"]


@command("coverage", passes_on=("--model.", "--data."))
def coverage(
    model_config: list[str],
    length: int | None = None,
    hops: Literal[1, 2] = 1,
    json: str | None = None,
    passed_on: list[str] | None = None,
) -> int:
    """Which distances a model's attention reaches.

    For the model of ``--model_config`` files (read offline, nothing built but the attention
    patterns) at length T (default: the training length), prints each layer's attended
    distances (a learned alpha at its starting value), their union over layers, how many lie
    beyond the window W, and with ``--hops 2`` the distances reachable by composing a layer
    with any later one (the residual stream carries a layer's output to every later layer;
    distance 0 is in every layer, so single hops are included; the reach stops at T - 1).
    ``--model.<key> VALUE`` / ``--data.<key> VALUE`` override the files' values.

        python -m lit_sparse coverage --model_config configs/fixed.yaml       # 19 distances
        python -m lit_sparse coverage --model_config configs/staggered.yaml   # union: 133
        python -m lit_sparse coverage --model_config configs/coprime.yaml --hops 2 --length 4096
        python -m lit_sparse coverage --model_config configs/fixed.yaml \\
            --model.attention.init_args.window 12

    Args:
        model_config: config files of the model, layered in order (as fit's --config)
        length: T (default: training length)
        json: also write the result to this JSON file
        passed_on: --model.<key> VALUE and --data.<key> VALUE overrides (as fit takes them)
        hops: 2: compose layers
    """
    config = read_model_config(model_config, passed_on or [])
    return print_report(compute_coverage(config, length, hops), json)


main = coverage  # the entry point's target
