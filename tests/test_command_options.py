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
