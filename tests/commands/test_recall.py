"""``python -m lit_sparse recall``: options that cannot work are one line before any work."""

from __future__ import annotations

from tests.command_line import command

main = command("recall")


def test_out_naming_a_folder_is_refused_before_the_evaluation(tmp_path, capsys):
    """Issue 36: the folder was found only when the result was written, after the whole
    evaluation (here the run is not even read: the option is checked first)."""
    assert main([str(tmp_path / "no-run-here"), "--out", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"error: --out {tmp_path}: a folder; give the JSON file to write (e.g. "
        f"{tmp_path / 'recall.json'})"
    ]
