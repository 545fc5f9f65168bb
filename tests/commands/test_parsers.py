"""The commands' shared parsers (lit_sparse/commands/__init__.py): a parse error of a
jsonargparse command is one line naming the option and the value, without the usage."""

from __future__ import annotations

import sys

import pytest

from lit_sparse.__main__ import main as lit_main


@pytest.fixture(autouse=True)
def plain_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lit_sparse"])


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (
            ["/tmp", "--temperature", "nan"],
            "temperature: Expected a <class 'float'>. Got value: nan",
        ),
        (["/tmp", "--max_new_tokens", "many"], "max_new_tokens: Expected a <class 'int'>"),
        ([], "the following arguments are required: path"),
    ],
)
def test_a_parse_error_is_one_line_without_the_usage(args, shown, capsys):
    """Issue 57 (minor): ``generate --temperature nan`` printed the usage (twice, in the
    walk), a tip and a two-line report."""
    with pytest.raises(SystemExit) as info:
        lit_main(["generate", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {shown}")
    assert err.endswith("(python -m lit_sparse generate --help lists the options)\n")


def test_what_print_config_writes_is_read_back_with_options(tmp_path, capsys):
    """Issue 57 (minor): ``matrix --print_config`` could not be fed back (its --config goes to
    fit); ``--options FILE`` reads it, the fit options passed on included."""
    args = ["matrix", "--run", "fib_coprime_w8", "--config", "configs/quickstart.yaml"]
    with pytest.raises(SystemExit):
        lit_main([*args, "--print_config"])
    written = capsys.readouterr().out
    assert "passed_on:\n- --config\n- configs/quickstart.yaml\n" in written
    saved = tmp_path / "matrix.yaml"
    saved.write_text(written)
    with pytest.raises(SystemExit):
        lit_main(["matrix", "--options", str(saved), "--print_config"])
    assert capsys.readouterr().out == written
    saved.write_text("lst: true\n")
    assert lit_main(["matrix", "--options", str(saved)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --options {saved}: 'lst' is no option of this command: list,")
    assert err.count("\n") == 1
