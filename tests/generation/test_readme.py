"""The README's "Generating text" commands run exactly as written, on a tiny trained run
standing in for the quickstart's (``runs/quickstart/coprime``)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from lit_sparse.__main__ import main as lit_main

README = Path(__file__).resolve().parents[2] / "README.md"


def section_commands(title: str) -> list[str]:
    """Every ``python -m lit_sparse`` command in the bash blocks of a README section."""
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"```bash\n(.*?)```", text[start:end], flags=re.S)
    commands = []
    for block in blocks:
        for command in block.replace("\\\n", " ").splitlines():
            if command.startswith("python -m lit_sparse "):
                commands.append(command)
    return commands


def test_the_generating_text_commands_run_as_written(learned_run, tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs" / "quickstart"
    runs.mkdir(parents=True)
    (runs / "coprime").symlink_to(learned_run.log_dir.parent, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    commands = section_commands("Generating text")
    assert [shlex.split(c)[3] for c in commands] == ["generate", "export", "generate"]
    for command in commands:
        assert lit_main(shlex.split(command)[3:]) == 0, command
        out = capsys.readouterr().out
        if " generate " in command:
            assert out.startswith("ROMEO:"), command
    assert (tmp_path / "exported" / "quickstart-coprime" / "model.safetensors").is_file()
