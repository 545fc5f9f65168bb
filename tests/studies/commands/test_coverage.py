"""``coverage``: distances per layer, union, beyond-window counts, two hops; offline."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lit_sparse.__main__ import main as lit_main
from lit_sparse.parsing.config_files import read_model_config
from lit_sparse_studies.study.coverage import compute_coverage, format_ranges, two_hop

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs"


def main(argv):
    """``python -m lit_sparse coverage ...`` in this process."""
    from lit_sparse.__main__ import main as lit_main

    return lit_main(["coverage", *argv])


def union_line(text: str) -> tuple[int, int]:
    match = re.search(r"union over \d+ layers: (\d+) distances, (\d+) beyond", text)
    assert match, text
    return int(match.group(1)), int(match.group(2))


@pytest.mark.parametrize(
    ("config", "union", "beyond"),
    [("fixed.yaml", 19, 10), ("staggered.yaml", 133, 124), ("coprime.yaml", 133, 124)],
)
def test_paper_configs_at_w8_and_1024(config, union, beyond, capsys):
    assert lit_main(["coverage", "--model_config", str(CONFIGS / config)]) == 0
    out = capsys.readouterr().out
    assert "W=8" in out and "T=1024" in out
    assert union_line(out) == (union, beyond)
    if config == "fixed.yaml":  # every layer: 0..8 and the ten rungs 13..987
        rows = [
            line for line in out.splitlines() if re.match(r"\| \d+ \| 1\.0000 \| 19 \| 10 \|", line)
        ]
        assert len(rows) == 16  # Markdown rows: layer | alpha | count | >W | distances
        assert rows[0].endswith("| 0..8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987 |")


def test_window_override_and_length(capsys):
    args = [
        "--model_config",
        str(CONFIGS / "fixed.yaml"),
        "--model.attention.init_args.window",
        "12",
    ]
    assert main([*args, "--length", "512"]) == 0
    out = capsys.readouterr().out
    assert "W=12" in out and "T=512 (trained at 1024)" in out
    # 0..12 plus rungs 13..377 (610 and 987 do not fit in 512)
    assert union_line(out) == (13 + 8, 8)


def two_hops_by_enumeration(per_layer, length: int) -> list[int]:
    """Distances through a layer and any later one (a + b <= length - 1), by listing every
    pair: the oracle of study.coverage.two_hop."""
    reach = set()
    for index, first in enumerate(per_layer):
        for second in per_layer[index + 1 :]:
            reach |= {a + b for a in first for b in second if a + b <= length - 1}
    return sorted(reach)


def test_two_hops_compose_a_layer_with_any_later_one():
    assert two_hop([[0, 2], [0, 3]], 10) == [0, 2, 3, 5]
    assert two_hop([[0, 5], [0, 6]], 10) == [0, 5, 6]
    assert two_hop([[0, 5], [0, 6]], 6) == [0, 5]  # 6 and 11 are past the length


def test_two_hops_are_printed_and_match_the_pure_function(capsys):
    assert main(["--model_config", str(CONFIGS / "staggered.yaml"), "--hops", "2"]) == 0
    out = capsys.readouterr().out
    spec = read_model_config([CONFIGS / "staggered.yaml"])
    layers = [p.distances(1024) for p in spec.patterns()]
    expected = two_hops_by_enumeration(layers, 1024)
    assert two_hop(layers, 1024) == expected
    assert f"two hops (a layer, then any later layer): {len(expected)} distances" in out


def test_two_hop_fast_path_equals_pure_function_on_small_cases():
    cases = [[[0, 1, 5], [0, 2, 7]], [[0, 3], [0, 1], [0, 4, 9]], [[0], [0]]]
    for layers in cases:
        for length in (4, 8, 20):
            assert two_hop(layers, length) == two_hops_by_enumeration(layers, length)


def test_layered_configs_take_the_quickstart_shape():
    spec = read_model_config([CONFIGS / "staggered.yaml", CONFIGS / "quickstart.yaml"])
    coverage = compute_coverage(spec)
    assert spec.arch.n_layers == 5 and coverage.length == 256 and spec.arch.vocab_size == 8192
    assert len(coverage.layers) == 5


def test_format_ranges():
    assert format_ranges([0, 1, 2, 3, 5, 6, 9]) == "0..3, 5, 6, 9"
    assert format_ranges([]) == "none"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model.attention.init_args.window", "-1"], "window must be >= 0, got -1"),
        (["--model.attention.init_args.window", "x"], "window: Expected a <class 'int'>"),
        (["--bogus", "1"], "unrecognized arguments: --bogus 1"),
        (["--length", "0"], "--length=0: expected a positive integer"),
    ],
)
def test_bad_input_is_one_line(args, message, capsys):
    try:
        code = main(["--model_config", str(CONFIGS / "fixed.yaml"), *args])
    except SystemExit as done:  # a parse error (an option coverage does not have)
        code = done.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_missing_config_is_one_line(capsys, tmp_path):
    assert main(["--model_config", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot be read" in capsys.readouterr().err
