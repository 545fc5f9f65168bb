"""Every registered command (built-in and the studies') takes its options from YAML:
``--print_config`` prints them as a file that ``--config`` reads back into the same command
(one jsonargparse parser stack, lit_sparse/commands/_dispatch.py)."""

from __future__ import annotations

import pytest
import yaml

from lit_sparse.__main__ import main
from lit_sparse.commands import COMMANDS, parse_command

PASSED_THROUGH = {"lm-eval"}  # every option is lm-eval's own, --config and --help included

# command -> (words, whether running it is cheap: then both runs' output is compared)
CASES = {
    "bench": (["attention", "--lengths", "256", "--plugins", "fibonacci", "--busy-cores", "0"], 0),
    "coverage": (
        ["--model_config", "configs/fixed.yaml", "--model.attention.init_args.window", "4"],
        1,
    ),
    "export": (["runs/some/run", "--out", "exported", "--format", "llama"], 0),
    "flops": (["--model_config", "configs/fixed.yaml", "--length", "256", "--no-check"], 1),
    "generate": (["runs/some/run", "--prompt", "ROMEO:", "--top-k", "5", "--ignore_eos"], 0),
    "lm-eval-tasks": (["--list"], 1),
    "matrix": (
        [
            "--run",
            "fib_coprime_w8",
            "--fit_config",
            "configs/quickstart.yaml",
            "--trainer.max_steps",
            "3",
            "--dry-run",
        ],
        1,
    ),  # fmt: skip
    "plugins": (["dense", "sliding_window"], 1),
    "probe": (["--depths", "2", "--seeds", "0", "--model.lr", "0.01"], 0),
    "recall": (["runs/some/run", "--lengths", "512", "2048", "--new-offsets", "drop"], 0),
    "tasks": (["--list", "--tasks", "lego"], 1),
}


def test_every_command_has_a_round_trip_case():
    assert set(CASES) | PASSED_THROUGH == set(COMMANDS.names())


def printed(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--print_config"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(CASES))
def test_a_printed_config_runs_the_same_command(command, tmp_path, capsys):
    words, cheap = CASES[command]
    text = printed([command, *words], capsys)
    assert isinstance(yaml.safe_load(text), dict)
    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert parse_command(command, ["--config", str(config)]) == parse_command(command, words)
    assert printed([command, "--config", str(config)], capsys) == text  # a fixed point
    if cheap:
        assert main([command, *words]) == 0
        direct = capsys.readouterr().out
        assert main([command, "--config", str(config)]) == 0
        assert capsys.readouterr().out == direct


def test_a_config_names_the_run_it_reads(tmp_path, capsys):
    """A printed config's values are the command's: the file's RUN_DIR is the one evaluated."""
    text = printed(["recall", "runs/some/run", "--lengths", "512"], capsys)
    config = tmp_path / "recall.yaml"
    config.write_text(text.replace("runs/some/run", str(tmp_path / "missing")))
    assert main(["recall", "--config", str(config)]) == 2
    assert f"RUN_DIR {tmp_path / 'missing'}" in capsys.readouterr().err


def test_a_bad_config_key_is_one_line(tmp_path, capsys):
    config = tmp_path / "matrix.yaml"
    config.write_text("lst: true\n")
    with pytest.raises(SystemExit) as done:
        main(["matrix", "--config", str(config)])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "lst" in err and err.count("\n") == 1
