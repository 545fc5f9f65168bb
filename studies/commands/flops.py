"""``python -m lit_sparse flops``: forward FLOPs per token, by term, dense against sparse."""

from __future__ import annotations

from lit_sparse.commands import command, print_report
from lit_sparse.parsing import read_model_config
from lit_sparse_studies.study.flops import flops_report

__all__ = ["flops", "main"]


@command("flops", passes_on=("--model.", "--data."))
def flops(
    model_config: list[str],
    length: int | None = None,
    no_check: bool = False,
    json: str | None = None,
    passed_on: list[str] | None = None,
) -> int:
    """Forward FLOPs per token, by term, dense against sparse.

    For the model of ``--model_config`` files (read offline) at length T (default: the training
    length), prints the forward FLOPs per predicted token split into attention scores,
    attention mixing, projections, MLP and LM head, for the dense model of the same shape and
    for the config's attention, with the keys per query each layer computes. The counts are
    :func:`lit_sparse.evaluation.forward_flops_per_token` (the function the
    ``SparseThroughputMonitor`` uses; a training step is 3x forward): multiply-adds count 2,
    element-wise work is not counted, dense counts the full T x T score matrix (as SDPA's math
    path and torch's flop counter do; flash kernels skip about half of it). The dense total is
    checked against Lightning's ``measure_flops`` (torch's FlopCounterMode on the meta device).

        python -m lit_sparse flops --model_config configs/fixed.yaml
        python -m lit_sparse flops --model_config configs/staggered.yaml --length 4096

    Args:
        model_config: config files of the model, layered in order (as fit's --config)
        length: T (default: training length)
        json: also write the result to this JSON file
        passed_on: --model.<key> VALUE and --data.<key> VALUE overrides (as fit takes them)
        no_check: skip the measure_flops check of dense
    """
    config = read_model_config(model_config, passed_on or [])
    return print_report(flops_report(config, length, check=not no_check), json)


main = flops  # the entry point's target
