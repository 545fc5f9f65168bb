"""``python -m lit_sparse lm-eval`` options that cannot work are one ``error:`` line and exit
status 2 before lm-eval loads a task or the model (in-process: no lm-eval run is started)."""

from __future__ import annotations

import pytest

from lit_sparse.interop.shipped_tasks import TASKS_DIR
from tests.command_line import command

main = command("lm-eval")


def lm_eval_args(folder, *extra: str) -> list[str]:
    return [
        "--model", "lit_sparse",
        "--model_args", f"pretrained={folder}",
        "--device", "cpu",
        "--tasks", "lit_sparse_math_choice",
        "--include_path", str(TASKS_DIR),
        *extra,
    ]  # fmt: skip


def one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("limit", [["--limit", "0"], ["--limit=-3"], ["-L", "0.0"]])
def test_a_limit_of_no_documents_is_one_line(random_export, capsys, limit):
    """Issue 36: lm-eval raised its ValueError ("did not find any docs") after loading all."""
    assert main(lm_eval_args(random_export, *limit)) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: --limit {limit[-1].split('=')[-1]}: evaluates no documents")


@pytest.mark.parametrize("template", [[], ["chatml"]])
def test_a_chat_template_is_one_line(random_export, capsys, template):
    """Issue 36: lm-eval's NotImplementedError traceback after the model had loaded."""
    assert main(["run", *lm_eval_args(random_export, "--apply_chat_template", *template)]) == 2
    assert one_error_line(capsys).startswith(
        "error: --apply_chat_template: the lit_sparse model has no chat template"
    )
