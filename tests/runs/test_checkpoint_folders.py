"""Sharded checkpoint folders (lit_sparse/runs/checkpoint_folders.py), written here by
torch.distributed.checkpoint in one process: read back as one dict, and each way a folder is
incomplete or damaged named, by crc32.json where there is one, else by the shards' index.
FSDP2 runs writing and resuming them: tests/reliability/test_fsdp2_runs.py."""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp

from lit_sparse.runs.checkpoint_folders import (
    CHECKSUMS,
    METADATA,
    checkpoint_bytes,
    file_checksums,
    folder_problem,
    is_checkpoint,
    is_sharded_checkpoint,
    read_folder,
)

WEIGHTS = {"w": torch.arange(64.0), "b": torch.ones(3)}


@pytest.fixture
def folder(tmp_path):
    """A sharded checkpoint of ``WEIGHTS`` with its meta.pt, without crc32.json."""
    path = tmp_path / "step=4.ckpt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "torch.distributed is disabled": one process
        dcp.save({"state_dict": dict(WEIGHTS)}, checkpoint_id=str(path), no_dist=True)
    torch.save({"global_step": 4}, path / METADATA)
    return path


def shard(path):
    (found,) = path.glob("*.distcp")
    return found


def test_a_whole_folder_reads_back_as_one_dict(folder):
    assert is_sharded_checkpoint(folder) and is_checkpoint(folder)
    assert not is_sharded_checkpoint(folder.parent) and not is_checkpoint(folder / "missing")
    checkpoint = read_folder(folder)
    assert checkpoint["global_step"] == 4
    assert all(torch.equal(checkpoint["state_dict"][k], v) for k, v in WEIGHTS.items())
    assert read_folder(folder, weights=False) == {"global_step": 4}
    assert folder_problem(folder) is None
    sizes = sum(p.stat().st_size for p in folder.iterdir())
    assert checkpoint_bytes(folder) == sizes and checkpoint_bytes(folder / METADATA) < sizes


def test_without_meta_pt_the_shards_alone_are_named_unusable(folder):
    (folder / METADATA).unlink()
    assert folder_problem(folder).startswith(f"its {METADATA} is missing")


def test_without_checksums_a_truncated_or_changed_shard_is_named(folder):
    data = bytearray(shard(folder).read_bytes())
    offset = data.index(torch.arange(64.0).numpy().tobytes()[8:16])
    data[offset] ^= 0x04  # one bit of w's record
    shard(folder).write_bytes(bytes(data))
    problem = folder_problem(folder)
    assert problem.startswith(f"its shard {shard(folder).name!r} is damaged: the record of ")
    assert folder_problem(folder, read_files=False) is None  # sizes only
    os.truncate(shard(folder), 10)
    assert folder_problem(folder, read_files=False) == (
        f"its shard {shard(folder).name!r} is missing or truncated"
    )


def test_with_checksums_every_files_size_and_crc_is_checked(folder):
    names = sorted(p.name for p in folder.iterdir())
    (folder / CHECKSUMS).write_text(json.dumps({"files": file_checksums(folder, names)}))
    assert folder_problem(folder) is None
    name = shard(folder).name
    data = bytearray(shard(folder).read_bytes())
    data[-1] ^= 0x01
    shard(folder).write_bytes(bytes(data))
    assert (
        folder_problem(folder)
        == f"its file {name!r} fails its CRC-32 check (a changed bit or a partial copy)"
    )
    assert folder_problem(folder, read_files=False) is None
    os.truncate(shard(folder), 10)
    assert folder_problem(folder, read_files=False).startswith(f"its file {name!r} has 10 bytes, ")
    shard(folder).unlink()
    assert folder_problem(folder) == f"its file {name!r} is missing"
    (folder / CHECKSUMS).write_text("{")
    assert folder_problem(folder).startswith(f"{CHECKSUMS} is not readable (")
