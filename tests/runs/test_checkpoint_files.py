"""Checkpoint files as read (lit_sparse/runs/checkpoint_files.py): every CRC verified, a safe
load's refusal in one line, the config-against-checkpoint differences, and the tokenizer a
checkpoint records. Every reader refusing a damaged run: tests/reliability/test_integrity.py."""

from __future__ import annotations

import fractions
import os

import pytest
import torch

from lit_sparse.errors import CheckpointError
from lit_sparse.runs.checkpoint_files import (
    check_tokenizer,
    checkpoint_tokenizer,
    differences,
    read_checkpoint,
    verify_checkpoint,
)
from tests.reliability.cli_runs import flip_bit


def saved(folder, name: str = "last.ckpt"):
    path = folder / name
    torch.save({"global_step": 3, "state_dict": {"w": torch.arange(64.0)}}, path)
    return path


def test_a_whole_checkpoint_is_read_on_the_cpu(tmp_path):
    path = saved(tmp_path)
    assert verify_checkpoint(path) == path
    loaded = read_checkpoint(path)
    assert loaded["global_step"] == 3 and torch.equal(loaded["state_dict"]["w"], torch.arange(64.0))


def test_a_changed_bit_is_refused_naming_the_record_and_the_other_checkpoints(tmp_path):
    saved(tmp_path, "step=2.ckpt")
    path = saved(tmp_path)
    record = flip_bit(path)
    with pytest.raises(CheckpointError) as caught:
        verify_checkpoint(path)
    assert str(caught.value) == (
        f"ckpt_path={str(path)!r} is damaged, so it is not used: record {record!r} fails its "
        "CRC-32 check (a changed bit or a partial copy); other checkpoints there: step=2.ckpt"
    )


def test_a_truncated_file_a_folder_and_a_missing_path_are_one_line_each(tmp_path):
    path = saved(tmp_path)
    os.truncate(path, path.stat().st_size // 2)
    with pytest.raises(
        CheckpointError, match=r"cannot be read as a checkpoint, so it is not used \(truncated"
    ):
        verify_checkpoint(path)
    with pytest.raises(CheckpointError, match=r": not a file$"):
        verify_checkpoint(tmp_path)  # a folder that is no sharded checkpoint
    with pytest.raises(CheckpointError, match=r"missing.ckpt': no such file$"):
        read_checkpoint(tmp_path / "missing.ckpt")
    with pytest.raises(CheckpointError, match=r"missing.ckpt': No such file or directory$"):
        verify_checkpoint(tmp_path / "missing.ckpt")


def test_an_unpicklable_checkpoint_is_refused_without_unsafe_advice(tmp_path):
    path = tmp_path / "last.ckpt"
    torch.save({"global_step": 1, "ratio": fractions.Fraction(1, 3)}, path)
    with pytest.raises(CheckpointError) as caught:
        read_checkpoint(path)
    message = str(caught.value)
    assert "\n" not in message and "fractions.Fraction" in message
    assert "weights_only" not in message


def test_differences_name_each_changed_key_and_another_class_in_one_line():
    config = {
        "arch": {"d_model": 32, "n_layers": 2},
        "attention": {"class_path": "a.Fib", "init_args": {"window": 8}},
    }
    found = {
        "arch": {"d_model": 64, "n_layers": 2},
        "attention": {"class_path": "a.Fib", "init_args": {"window": 4}},
    }
    assert differences(config, found, "model") == [
        "model.arch.d_model: config 32, checkpoint 64",
        "model.attention.window: config 8, checkpoint 4",
    ]
    other = {"class_path": "b.Linear", "init_args": {"alpha_min": 0.5}}
    assert differences(config["attention"], other, "attention") == [
        "attention: config Fib(window=8), checkpoint Linear(alpha_min=0.5)"
    ]
    assert differences(config, config, "model") == []


def test_the_tokenizer_a_checkpoint_records_must_be_the_one_given():
    checkpoint = {"global_step": 1, "datamodule": {"tokenizer_sha256": "ab" * 32}}
    assert checkpoint_tokenizer(checkpoint) == "ab" * 32
    assert checkpoint_tokenizer({"global_step": 1}) is None
    check_tokenizer(None, "cd" * 32, "embedded", "x.ckpt")  # not recorded: passes
    check_tokenizer("ab" * 32, "ab" * 32, "embedded", "x.ckpt")
    with pytest.raises(CheckpointError) as caught:
        check_tokenizer("ab" * 32, "cd" * 32, "my.json", "x.ckpt")
    assert str(caught.value) == (
        "ckpt_path='x.ckpt' was trained with another tokenizer than data.tokenizer='my.json' "
        "(sha256 abababababab... in the checkpoint, cdcdcdcdcdcd... here): token ids would mean "
        "other text; use the run's own tokenizer"
    )
