"""One list style on every command line: space-separated values (``--lengths 1024 2048``),
as the argparse commands take them, for the Lightning commands' list options too."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import pytest
import yaml

from lit_sparse.cli import main
from lit_sparse.parsing.config_files import read_model_config
from lit_sparse.parsing.list_options import join_list_values, list_kind

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


@pytest.mark.parametrize(
    ("hint", "kind"),
    [
        (list[int], "list"),
        (list[int] | None, "list"),
        (tuple[float, float], "list"),
        (list[Literal["fit", "validate"]] | None, "list"),
        (list[int] | str | int, "either"),
        (int, None),
        (dict[str, int], None),
        (list[dict], None),
    ],
)
def test_list_kind(hint, kind):
    assert list_kind(hint) == kind


def test_values_after_a_list_option_become_one_value():
    options = {"--lengths": "list", "--trainer.devices": "either"}
    assert join_list_values(["--lengths", "1024", "2048", "--x", "1"], options) == [
        "--lengths",
        "[1024, 2048]",
        "--x",
        "1",
    ]
    # one value: wrapped for a list, kept for a list-or-scalar option
    assert join_list_values(["--lengths", "1024"], options) == ["--lengths", "[1024]"]
    assert join_list_values(["--trainer.devices", "2"], options) == ["--trainer.devices", "2"]
    assert join_list_values(["--trainer.devices", "0", "1"], options)[1] == "[0, 1]"
    # the bracketed, null, = and appending forms pass through; negative numbers are values
    for args in (["--lengths", "[1, 2]"], ["--lengths", "null"], ["--lengths+", "7"]):
        assert join_list_values(args, options) == args
    assert join_list_values(["--lengths=4"], options) == ["--lengths", "[4]"]
    assert join_list_values(["--lengths", "-1", "2"], options)[1] == "[-1, 2]"


def printed_config(capsys, *args: str) -> dict:
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--print_config"])
    assert exit_info.value.code == 0
    return yaml.safe_load(capsys.readouterr().out)


@pytest.mark.slow
def test_extrapolate_takes_the_readme_form(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = ["--config", str(ROOT / "configs" / "fixed.yaml"), "--config", str(TINY)]
    spaced = printed_config(capsys, "extrapolate", *config, "--lengths", "1024", "2048", "4096")
    assert spaced["lengths"] == [1024, 2048, 4096]
    bracketed = printed_config(capsys, "extrapolate", *config, "--lengths", "[1024, 2048]")
    assert bracketed["lengths"] == [1024, 2048]
    one = printed_config(
        capsys, "extrapolate", *config, "--multiples", "2", "--new_offsets", "drop"
    )
    assert one["multiples"] == [2.0] and one["new_offsets"] == "drop"
    fit = printed_config(capsys, "fit", *config, "--model.betas", "0.8", "0.9")
    assert fit["model"]["betas"] == [0.8, 0.9]


def test_config_commands_take_space_separated_model_values():
    spec = read_model_config(
        [ROOT / "configs" / "fixed.yaml", TINY],
        ["--model.attention.init_args.schedule", "Custom"]
        + ["--model.attention.init_args.schedule.alphas", "0.75", "1.25"],
    )
    assert spec.attention.schedule.alphas == [0.75, 1.25]
