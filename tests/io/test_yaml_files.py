"""The YAML loader (lit_sparse/io/yaml_files.py): a mapping, or one line naming the file."""

from __future__ import annotations

import pytest

from lit_sparse.errors import ConfigError
from lit_sparse.io.yaml_files import check_config_files, load_yaml


def test_a_mapping_loads_and_an_empty_file_is_an_empty_mapping(tmp_path):
    (tmp_path / "a.yaml").write_text("model:\n  lr: 0.001\n")
    (tmp_path / "empty.yaml").write_text("")
    assert load_yaml(tmp_path / "a.yaml") == {"model": {"lr": 0.001}}
    assert load_yaml(tmp_path / "empty.yaml") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model: [1, 2\n", "not valid YAML at line 2, column 1"),
        ("- 1\n- 2\n", "expected a mapping of options, got list"),
        (b"a: \xff\x01\n", "cannot be read (not UTF-8 text"),
    ],
)
def test_a_bad_file_is_one_line_naming_what_and_the_file(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_yaml(path, "--model_config")
    line = str(err.value)
    assert line.startswith(f"--model_config {path}: ") and message in line and "\n" not in line


def test_a_missing_file_cannot_be_read(tmp_path):
    with pytest.raises(ConfigError, match=r"--config .*missing\.yaml: cannot be read"):
        load_yaml(tmp_path / "missing.yaml")


def test_check_config_files_reads_every_config_argument_form(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("a: 1\n")
    check_config_files(["--config", str(good), f"--config={good}", "-c", str(good), "--x", "1"])
    for args in (["--config", "nope.yaml"], ["--config=nope.yaml"], ["-c", "nope.yaml"]):
        with pytest.raises(ConfigError, match=r"--config nope\.yaml: cannot be read"):
            check_config_files(args)
