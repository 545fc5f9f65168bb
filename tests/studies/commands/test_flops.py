"""``flops``: per-token forward FLOPs by term; dense agrees with Lightning's measure_flops;
the sparse count is the one the SparseThroughputMonitor uses."""

from __future__ import annotations

import re
from pathlib import Path

from lit_sparse.__main__ import main as lit_main
from lit_sparse.evaluation import forward_flops_per_token
from lit_sparse.parsing.config_files import read_model_config

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"


def main(argv):
    """``python -m lit_sparse flops ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["flops", *argv])


def number(text: str, label: str, column: int) -> int:
    line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    cells = line.strip("| ").split(" | ")  # a Markdown row: term | dense | sparse | ratio
    return int(cells[column].replace(",", ""))


def test_fixed_at_1024_prints_every_term_and_the_check(capsys):
    assert lit_main(["flops", "--model_config", str(CONFIGS / "fixed.yaml")]) == 0
    out = capsys.readouterr().out
    for label in ("attention scores", "attention mixing", "projections", "MLP", "LM head"):
        assert label in out
    spec = read_model_config([CONFIGS / "fixed.yaml"])
    dense = forward_flops_per_token(spec.arch, [1024] * 16)
    sparse = forward_flops_per_token(spec.arch, [19] * 16)
    assert number(out, "total", 1) == dense.total
    assert number(out, "total", 2) == sparse.total
    assert number(out, "attention scores", 2) == 2 * 8 * 64 * 19 * 16
    check = re.search(r"measure_flops .* = ([\d,]+) per token; ours ([\d,]+) \(([-+\d.]+) %\)", out)
    assert check and abs(float(check.group(3))) < 1.0
    assert "88,146,944" in out  # the paper's 2 x non-embedding parameters


def test_bad_length_is_one_line(capsys):
    assert (
        main(["--model_config", str(CONFIGS / "fixed.yaml"), "--length", "-3", "--no-check"]) == 2
    )
    assert capsys.readouterr().err.strip() == "error: --length=-3: expected a positive integer"
