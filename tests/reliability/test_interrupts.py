"""Ctrl-C (SIGINT) ends every command with one line and exit status 130, keeping what was
done: generate keeps the streamed text, export the earlier export, fit resumes; Lightning's
own graceful stop of the trainer runs first (its notice, then ours)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from lit_sparse import LanguageModel, build_attention
from lit_sparse.__main__ import main as lit_main

from .cli_runs import ROOT, checkpoint_every, config_args, copy_run, fault, write_callbacks

LINE = "interrupted (Ctrl-C)"


@pytest.fixture(autouse=True)
def sigint_restored():
    """Lightning's graceful stop ignores SIGINT from then on: give pytest its handler back."""
    handler = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, handler)


@pytest.fixture
def model_folder(tmp_path):
    """A small random model saved with its tokenizer, as export leaves one."""
    from lit_sparse.config import ModelConfig
    from lit_sparse.data.tokenizer import load_tokenizer, round_up

    tokenizer = load_tokenizer("embedded")
    config = ModelConfig(
        vocab_size=round_up(tokenizer.size), context_length=32, n_layers=2, d_model=32,
        n_heads=2, n_kv_heads=1, head_dim=16,
    )  # fmt: skip
    torch.manual_seed(0)
    LanguageModel(config, build_attention("fibonacci", window=8)).save_pretrained(tmp_path / "m")
    tokenizer.tokenizer.save(str(tmp_path / "m" / "tokenizer.json"))
    return tmp_path / "m"


def interrupted_lines(err: str) -> list[str]:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert lines and lines[-1].startswith(LINE), err
    return lines


def test_generate_keeps_the_streamed_text(model_folder, monkeypatch, capsys):
    from lit_sparse.generation import text

    real, calls = text.TextStream.push, []

    def push(self, token):
        calls.append(token)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return real(self, token)

    monkeypatch.setattr(text.TextStream, "push", push)
    args = ["generate", str(model_folder), "--prompt", "ROMEO:", "--max_new_tokens", "50"]
    assert lit_main([*args, "--temperature", "0", "--ignore_eos"]) == 130
    out, err = capsys.readouterr()
    assert out.startswith("ROMEO:") and out.endswith("\n") and len(out) > len("ROMEO:\n")
    assert interrupted_lines(err) == [
        f"{LINE}: stopped after 6 new tokens; the text above is what was made"
    ]


def test_bench_and_a_command_before_its_work_are_one_line(monkeypatch, capsys):
    from lit_sparse_studies.bench import plan as bench

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "run_lengths", ctrl_c)
    assert lit_main(["bench", "attention", "--lengths", "64", "--plugins", "dense"]) == 130
    assert interrupted_lines(capsys.readouterr().err) == [LINE]


def test_matrix_stops_the_study_in_one_line(tmp_path, monkeypatch, capsys):
    from lit_sparse_studies.study import runner

    def ctrl_c(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "fit_in_subprocess", ctrl_c)
    args = ["matrix", "--preset", "cpu", "--seeds", "0", "--variants", "dense"]
    assert lit_main([*args, "--root", str(tmp_path), "--run"]) == 130
    out, err = capsys.readouterr()
    assert "[1/1] dense/seed0: starting: python -m lit_sparse fit" in out
    assert interrupted_lines(err) == [
        f"{LINE}: the study stopped; the same command goes on (complete runs are skipped, "
        "interrupted ones resumed)"
    ]


@pytest.mark.slow  # the finished run (trained)
def test_export_keeps_the_earlier_export(finished_run, tmp_path, monkeypatch, capsys):
    from lit_sparse.interop import export

    out = export.export_run(finished_run, tmp_path / "exp").folder
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "run_card", ctrl_c)
    assert lit_main(["export", str(finished_run), "--out", str(out)]) == 130
    assert interrupted_lines(capsys.readouterr().err) == [LINE]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["exp"], "no temporary folder is left"


@pytest.mark.slow  # trains
def test_fit_stops_gracefully_and_says_how_to_resume(in_workdir, capsys):
    callbacks = write_callbacks(
        in_workdir / "ctrl_c.yaml", checkpoint_every(2), fault("CtrlCAtStep", step=3)
    )
    assert lit_main(["fit", *config_args("fixed.yaml", callbacks)]) == 130
    lines = interrupted_lines(capsys.readouterr().err)
    assert (
        lines[-1]
        == f"{LINE}: the run stopped; --ckpt_path last resumes it from its last checkpoint"
    )
    plain = write_callbacks(in_workdir / "plain.yaml", checkpoint_every(2))
    assert lit_main(["fit", *config_args("fixed.yaml", plain), "--ckpt_path", "last"]) == 0
    last = in_workdir / "runs/fixed/version_0/checkpoints/last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 4


@pytest.mark.slow  # the finished run (trained)
def test_extrapolate_is_one_line_after_lightnings_notice(finished_run, in_workdir, capsys):
    run = copy_run(finished_run, in_workdir)
    callbacks = write_callbacks(in_workdir / "ctrl_c.yaml", fault("CtrlCAtValidationStart"))
    args = ["extrapolate", "--config", str(run / "config.yaml"), "--config", str(callbacks)]
    code = lit_main([*args, "--ckpt_path", str(run / "checkpoints/last.ckpt")])
    assert code == 130
    lines = interrupted_lines(capsys.readouterr().err)
    assert lines[-1] == f"{LINE}: extrapolate stopped"


SIGINT_AS_PYTHON_DOES = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv = ['lit_sparse', *sys.argv[1:]]; runpy.run_module('lit_sparse', run_name='__main__')"
)


@pytest.mark.slow  # starts a process
def test_a_real_sigint_during_generate(model_folder, tmp_path):
    """The issue's case, with a real signal: the text streamed so far is on stdout, one
    line on stderr, exit status 130."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out_file = tmp_path / "out.txt"
    with open(out_file, "w") as out:
        # Python's own Ctrl-C handler, even where the test runner ignores SIGINT (a child
        # inherits an ignored signal; a preexec_fn cannot set it from a worker's thread)
        process = subprocess.Popen(
            [sys.executable, "-c", SIGINT_AS_PYTHON_DOES, "generate", str(model_folder),
             "--prompt", "ROMEO:", "--max_new_tokens", "100000000", "--ignore_eos"],
            stdout=out, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while out_file.stat().st_size < 200:  # streaming: well into the generation
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        err = process.communicate(timeout=120)[1]
    assert process.returncode == 130, err
    lines = interrupted_lines(err)
    assert len(lines) == 1 and "new tokens; the text above is what was made" in lines[0], err
    text = out_file.read_text()  # 200 bytes at least, as waited for (a character may be 3)
    assert text.startswith("ROMEO:") and text.endswith("\n") and len(text.encode()) >= 200
