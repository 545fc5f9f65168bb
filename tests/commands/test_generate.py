"""``python -m lit_sparse generate`` on a tiny trained run: streams text with the run's
tokenizer, ``--stats`` prints tokens/s and the cache size, bad input is one line."""

from __future__ import annotations

import io
import os
import sys

import pytest

from lit_sparse.__main__ import main as lit_main


class Recorder(io.StringIO):
    """stdout that remembers each write (streaming means many writes, flushed as they come)."""

    def __init__(self):
        super().__init__()
        self.writes: list[str] = []
        self.flushes = 0

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)

    def flush(self) -> None:
        self.flushes += 1


def test_generate_streams_text_with_the_runs_tokenizer(learned_run, monkeypatch, capsys):
    out = Recorder()
    monkeypatch.setattr(sys, "stdout", out)
    args = ["generate", str(learned_run.log_dir), "--prompt", "To be, or not to be"]
    code = lit_main([*args, "--max_new_tokens", "12", "--seed", "0", "--ignore_eos", "--stats"])
    assert code == 0
    text = out.getvalue()
    assert text.startswith("To be, or not to be") and len(text) > len("To be, or not to be") + 3
    assert len([w for w in out.writes if w]) >= 4 and out.flushes >= 4  # piece by piece
    stats = capsys.readouterr().err
    assert "tokens/s" in stats and "KV cache:" in stats and "1 x 12 tokens" in stats


def test_greedy_generation_is_deterministic(learned_run, capsys):
    args = ["generate", str(learned_run.log_dir), "--prompt", "ROMEO:", "--temperature", "0"]
    outputs = []
    for _ in range(2):
        assert lit_main([*args, "--max_new_tokens", "10"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0].startswith("ROMEO:")


def test_a_prompt_file_and_a_checkpoint_path(learned_run, tmp_path, capsys):
    (tmp_path / "prompt.txt").write_text("First Citizen:", encoding="utf-8")
    checkpoint = learned_run.log_dir / "checkpoints" / "last.ckpt"
    args = ["generate", str(checkpoint), "--prompt_file", str(tmp_path / "prompt.txt")]
    assert lit_main([*args, "--max_new_tokens", "3", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.startswith("First Citizen:")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max_new_tokens", "0"], "error: max_new_tokens=0: must be >= 1"),
        (["--top_p", "1.5"], "error: top_p=1.5: must be in (0, 1]"),
        (["--top_p", "0"], "error: top_p=0.0: must be in (0, 1]"),
        (["--temperature", "-0.5"], "error: temperature=-0.5: must be a number >= 0"),
        (["--prompt_file", "no/such/prompt.txt"], "error: prompt_file='no/such/prompt.txt'"),
        # issue 47: bytes that are not UTF-8 (Python's argv holds them as surrogates) reached
        # the tokenizer: TypeError: TextInputSequence must be str
        (["--prompt", os.fsdecode(b"caf\xe9")], "error: --prompt: the byte 0xe9 at character 3"),
    ],
)
def test_bad_options_are_one_line_before_loading(learned_run, args, message, capsys):
    assert lit_main(["generate", str(learned_run.log_dir), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_an_unknown_run_path_is_one_line(tmp_path, capsys):
    missing = tmp_path / "runs" / "nothing"
    assert lit_main(["generate", str(missing), "--prompt", "x"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: path={str(missing)!r}: no such run folder, checkpoint or exported model folder\n"
    )
    (tmp_path / "empty").mkdir()
    assert lit_main(["generate", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: path=") and "no checkpoint found" in err
