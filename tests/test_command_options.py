"""lit_sparse's own commands take their options from YAML: ``--print_config`` prints them as a
file that ``--config`` reads back (jsonargparse's parser, as ``fit`` has)."""

from __future__ import annotations

import pytest
import yaml

from lit_sparse.__main__ import OWN_COMMANDS, main

PASSED_THROUGH = {"lm-eval"}  # every option is lm-eval's own


@pytest.mark.parametrize("command", sorted(set(OWN_COMMANDS) - PASSED_THROUGH))
def test_every_own_command_prints_its_options_as_yaml(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--print_config"])
    assert done.value.code == 0
    options = yaml.safe_load(capsys.readouterr().out)
    assert isinstance(options, dict) and options, command


def test_a_printed_config_is_read_back_with_config(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(
            [
                "recall",
                "runs/some/run",
                "--lengths",
                "512",
                "2048",
                "--new-offsets",
                "drop",
                "--print_config",
            ]
        )
    printed = capsys.readouterr().out
    assert yaml.safe_load(printed)["new_offsets"] == ["drop"]
    config = tmp_path / "recall.yaml"
    config.write_text(printed.replace("runs/some/run", str(tmp_path / "missing")))
    assert main(["recall", "--config", str(config)]) == 2  # the file's run, which is missing
    assert f"RUN_DIR {tmp_path / 'missing'}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "attention", "--lengths", "256"],
        ["bench", "decode"],
        ["coverage", "--config", "configs/fixed.yaml", "--model.attention.init_args.window", "4"],
        ["flops", "--config", "configs/fixed.yaml"],
        ["matrix", "--list", "--preset", "recall"],
        ["probe", "--depths", "2"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_the_studies_commands_print_their_options_too(argv, capsys):
    """The studies' argparse commands (subcommands, options passed on to fit) answer it as
    well, after the options they require."""
    with pytest.raises(SystemExit) as done:
        main([*argv, "--print_config"])
    assert done.value.code == 0
    options = yaml.safe_load(capsys.readouterr().out)
    assert isinstance(options, dict) and options
    if argv[0] == "coverage":
        assert options["passed_on"] == ["--model.attention.init_args.window", "4"]
