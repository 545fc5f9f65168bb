"""``python -m lit_sparse export``'s own checks (lit_sparse/commands/export.py): a format or
GGUF type outside the choices, or a GGUF type without ``--format gguf``, is one line before
any run is read. Exports themselves: tests/interop/test_export.py, tests/formats/test_gguf.py."""

from __future__ import annotations

import pytest

from lit_sparse.__main__ import main


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (
            ["--format", "onnx"],
            "error: --format onnx: expected one of lit_sparse, llama, mistral, gguf",
        ),
        (["--format", "gguf", "--gguf-type", "q2"], "error: --gguf-type q2: expected one of "),
        (
            ["--gguf-type", "f16"],
            "error: --gguf-type f16: only with --format gguf (got --format default)",
        ),
        (
            ["--format", "llama", "--gguf-type", "f32"],
            "error: --gguf-type f32: only with --format gguf (got --format llama)",
        ),
    ],
)
def test_a_bad_option_is_one_line_before_the_run_is_read(options, line, tmp_path, capsys):
    missing = tmp_path / "no_run"  # never read: the options are refused first
    assert main(["export", str(missing), "--out", str(tmp_path / "out"), *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1
    assert "no_run" not in err and not (tmp_path / "out").exists()
