"""Nothing damaged is loaded: a checkpoint with one changed bit, an unpicklable one, or one
trained with another tokenizer is refused by every reader in one line naming the file."""

from __future__ import annotations

import json
import logging

import pytest
import torch
import yaml

import lit_sparse
from lit_sparse.data import TextDataModule
from lit_sparse.data.embedded import TOKENIZER_PATH
from lit_sparse.errors import CheckpointError
from lit_sparse.runs.checkpoint_files import read_checkpoint
from tests.command_line import command as command_line

from .cli_runs import config_args, copy_run, errors, flip_bit, run_cli

tasks_main = command_line("tasks")


@pytest.fixture
def damaged(finished_run, in_workdir):
    """A copy of the finished run whose last.ckpt has one bit changed in a tensor record."""
    run = copy_run(finished_run, in_workdir)
    record = flip_bit(run / "checkpoints" / "last.ckpt")
    return run, record


def test_a_changed_bit_loads_silently_in_torch(damaged):
    """The premise: torch.load itself does not notice (so every reader must verify)."""
    run, _ = damaged
    loaded = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert loaded["global_step"] == 4


def test_validate_refuses_a_damaged_checkpoint(damaged, capsys):
    run, record = damaged
    ckpt = run / "checkpoints" / "last.ckpt"
    code, err = run_cli(
        ["validate", "--config", str(run / "config.yaml"), "--ckpt_path", str(ckpt)], capsys
    )
    assert code == 2
    assert len(errors(err)) == 1 and err[-1] == errors(err)[0], err
    assert str(ckpt) in err[-1] and repr(record) in err[-1] and "CRC-32" in err[-1]
    assert not list(run.glob("evals/validate-*")), "nothing ran"


def test_resume_refuses_a_damaged_checkpoint(damaged, capsys):
    run, record = damaged
    code, err = run_cli(["fit", *config_args(), "--ckpt_path", str(run)], capsys)
    assert code == 2 and err[-1].startswith("error: ") and repr(record) in err[-1], err
    assert not list(run.glob("config.resume-*.yaml")), "nothing was written into the run"


def test_load_run_and_tasks_refuse_a_damaged_checkpoint(damaged, capsys):
    run, record = damaged
    with pytest.raises(CheckpointError, match="fails its CRC-32 check"):
        lit_sparse.load_run(run)
    assert tasks_main([str(run), "--per-group", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and repr(record) in err[0]


@pytest.fixture
def other_tokenizer(tmp_path):
    """The embedded tokenizer with two tokens' ids swapped: same size, other text per id."""
    values = json.loads(TOKENIZER_PATH.read_text())
    vocab = values["model"]["vocab"]
    a, b = "the", "and"
    vocab[a], vocab[b] = vocab[b], vocab[a]
    path = tmp_path / "other" / "tokenizer.json"
    path.parent.mkdir()
    path.write_text(json.dumps(values))
    return path


def test_a_checkpoint_is_tied_to_its_tokenizer(finished_run, other_tokenizer, capsys, in_workdir):
    ckpt = finished_run / "checkpoints" / "last.ckpt"
    args = ["validate", "--config", str(finished_run / "config.yaml"), "--ckpt_path", str(ckpt)]
    code, err = run_cli([*args, "--data.tokenizer", str(other_tokenizer)], capsys)
    assert code == 2 and len(errors(err)) == 1, err
    assert "another tokenizer" in err[-1] and str(other_tokenizer) in err[-1]
    # the data module refuses it too (a Trainer used without the CLI)
    module = TextDataModule(tokenizer=str(other_tokenizer), seq_len=48)
    with pytest.raises(CheckpointError, match="another tokenizer"):
        module.load_state_dict(read_checkpoint(ckpt)["TextDataModule"])
    # and the tasks command, given that tokenizer
    assert tasks_main([str(finished_run), "--tokenizer", str(other_tokenizer)]) == 2
    assert "another tokenizer" in capsys.readouterr().err
    # its own tokenizer is accepted
    assert lit_sparse.load_run(finished_run).tokenizer_sha256 is not None


@pytest.mark.slow  # the finished run (trained), lm-eval's import
def test_a_runs_tokenizer_changed_since_training_is_refused_by_every_route(
    finished_run, other_tokenizer, tmp_path, capsys, caplog
):
    """Issue 36: only fit and validate checked it; load_pretrained, generate, lm-eval's
    ``pretrained=RUN`` and export used the changed file silently (export shipped it)."""
    from lit_sparse.__main__ import main as lit_main

    run = copy_run(finished_run, tmp_path)
    tokenizer_file = tmp_path / "tokenizer" / "tokenizer.json"
    tokenizer_file.parent.mkdir()
    tokenizer_file.write_bytes(TOKENIZER_PATH.read_bytes())  # the one it was trained with
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["data"]["init_args"]["tokenizer"] = str(tokenizer_file)
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    trained = lit_sparse.load_run(run).tokenizer_sha256
    assert lit_sparse.load_pretrained(run)[1].sha256 == trained  # the same tokenizer: loads

    tokenizer_file.write_bytes(other_tokenizer.read_bytes())  # changed after training
    with pytest.raises(CheckpointError) as err:
        lit_sparse.load_pretrained(run)
    message = str(err.value)
    assert "\n" not in message and "was trained with another tokenizer" in message
    assert str(tokenizer_file) in message and "with tokenizer=..." in message
    for command in (
        ["generate", str(run), "--prompt", "ROMEO:", "--max_new_tokens", "2"],
        ["export", str(run), "--out", str(tmp_path / "exported")],
    ):
        code = lit_main(command)
        lines = capsys.readouterr().err.splitlines()
        assert code == 2 and len(errors(lines)) == 1, (command, lines)
        assert "another tokenizer" in lines[-1] and "with --tokenizer" in lines[-1], lines
    assert not (tmp_path / "exported").exists()
    lm_eval_model = pytest.importorskip("lit_sparse.interop.lm_eval")
    with pytest.raises(CheckpointError, match="another tokenizer.*model_args tokenizer="):
        lm_eval_model.LitSparseLM(pretrained=str(run), device="cpu")

    # named on purpose: used as asked, with a note; the export records the one it ships
    with caplog.at_level(logging.WARNING, logger="lit_sparse.interop.loading"):
        _, tokenizer = lit_sparse.load_pretrained(run, tokenizer=str(tokenizer_file))
        exported = tmp_path / "exported"
        code = lit_main(
            ["export", str(run), "--out", str(exported), "--tokenizer", str(other_tokenizer)]
        )
    assert code == 0 and tokenizer.sha256 != trained
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 2 and all("using it as asked" in note for note in notes), notes
    recorded = json.loads((exported / "config.json").read_text())["tokenizer_sha256"]
    assert recorded == tokenizer.sha256
    assert lit_sparse.load_pretrained(exported)[1].sha256 == recorded  # the shipped file's
