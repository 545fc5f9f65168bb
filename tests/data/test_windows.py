"""Held-out windows: fixed, non-overlapping, over the held-out tokens after one end-of-text
token, y = x shifted by one, identical across constructions, and ranks' shares partition
them exactly."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils.data import IterableDataset

from lit_sparse.data import SourceConfig, TextDataModule

from .conftest import random_doc
from .fresh_process import in_fresh_process

T = 16


@pytest.fixture
def val_file(tmp_path):
    """A separate held-out parquet file for source c."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(99)
    path = tmp_path / "sources" / "c_val.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    docs = [random_doc(rng, "c", rng.randint(10, 60)) for _ in range(40)]
    pq.write_table(pa.table({"body": docs}), path)
    return path


def make(tmp_path, tok, paths, val_file, **kw) -> TextDataModule:
    srcs = [
        SourceConfig(
            name="a", path="json", data_files=str(paths["a"]), weight=0.5, val_tokens=2500
        ),
        SourceConfig(
            name="c",
            path="parquet",
            data_files=str(paths["c"]),
            weight=0.5,
            text_field="body",
            val_split="validation",
            val_data_files=str(val_file),
            val_name="c_held",
        ),
    ]
    args = {"seq_len": T, "batch_size": 3, "cache_dir": str(tmp_path / "cache")}
    args.update(kw)
    dm = TextDataModule(sources=srcs, tokenizer=str(tok), **args)
    dm.prepare_data()
    dm.setup("fit")
    return dm


def held_out_tokens(tmp_path, part_glob: str) -> np.ndarray:
    path = next((tmp_path / "cache" / "tokens").glob(part_glob))
    return np.fromfile(path, dtype=np.uint16).astype(np.int64)


def held_out_stream(tmp_path, part_glob: str, dm: TextDataModule) -> np.ndarray:
    """What the windows read: the end-of-text token, then the held-out file."""
    return np.concatenate([[dm.eos_token_id], held_out_tokens(tmp_path, part_glob)])


def windows(loader) -> list[torch.Tensor]:
    out = []
    for x, y in loader:
        assert x.dtype == y.dtype == torch.int64 and x.shape == y.shape
        assert torch.equal(x[:, 1:], y[:, :-1])  # y is x shifted by one
        out.extend(torch.cat([x, y[:, -1:]], dim=1))  # the T + 1 tokens of each window
    return out


def test_names_and_loaders(tmp_path, word_tok, local_sources, val_file):
    dm = make(tmp_path, word_tok, local_sources, val_file)
    assert dm.val_set_names == ["a", "c_held"]
    loaders = dm.val_dataloader()
    assert len(loaders) == 2
    for loader in loaders:  # iterable: Lightning injects no (padding) DistributedSampler
        assert isinstance(loader.dataset, IterableDataset)


def test_windows_are_fixed_and_non_overlapping(tmp_path, word_tok, local_sources, val_file):
    dm = make(tmp_path, word_tok, local_sources, val_file)
    for name, loader, glob in zip(
        dm.val_set_names, dm.val_dataloader(), ["json-*.val.bin", "parquet-*.val.bin"], strict=True
    ):
        stream = held_out_stream(tmp_path, glob, dm)
        got = windows(loader)
        assert len(got) == (len(stream) - 1) // T
        for i, w in enumerate(got):  # window i is stream[i*T : i*T + T + 1]
            assert torch.equal(w, torch.from_numpy(stream[i * T : i * T + T + 1])), (name, i)
        assert int(got[0][0]) == dm.eos_token_id  # the first document follows an EOS
        if name == "a":
            assert len(stream) == 2501


def all_windows(tmp_path, tok, paths, val_file, num_workers) -> list[list[torch.Tensor]]:
    dm = make(tmp_path, tok, paths, val_file, num_workers=num_workers)
    return [windows(dl) for dl in dm.val_dataloader()]


@pytest.mark.slow  # starts a Python process
def test_identical_across_constructions(tmp_path, word_tok, local_sources, val_file):
    a = all_windows(tmp_path, word_tok, local_sources, val_file, num_workers=0)
    args = (tmp_path, word_tok, local_sources, val_file, 2)  # workers fork in a clean process
    b = in_fresh_process(all_windows, *args, work_dir=tmp_path)
    for wa, wb in zip(a, b, strict=True):
        assert len(wa) == len(wb) > 0
        assert all(torch.equal(u, v) for u, v in zip(wa, wb, strict=True))


@pytest.mark.parametrize("world_size", [2, 3])
def test_ranks_partition_the_windows(tmp_path, word_tok, local_sources, val_file, world_size):
    full = windows(make(tmp_path, word_tok, local_sources, val_file).val_dataloader()[0])
    shares = []
    for rank in range(world_size):
        dm = make(tmp_path, word_tok, local_sources, val_file)
        dm.trainer = SimpleNamespace(global_rank=rank, world_size=world_size)
        shares.append(windows(dm.val_dataloader()[0]))
    assert sum(len(s) for s in shares) == len(full)  # no padding, no duplicates
    for rank, share in enumerate(shares):  # rank r holds windows r, r + R, ...
        assert all(torch.equal(w, full[rank + k * world_size]) for k, w in enumerate(share))


def test_val_windows_caps_and_longer_lengths_cover_the_same_tokens(
    tmp_path, word_tok, local_sources, val_file
):
    dm = make(tmp_path, word_tok, local_sources, val_file, val_windows=40)
    stream = held_out_stream(tmp_path, "json-*.val.bin", dm)
    for mult, expected in ((1, 40), (2, 20), (4, 10), (3, 13)):
        got = windows(dm.val_windows_at(mult * T, "a"))
        assert len(got) == expected
        assert all(len(w) == mult * T + 1 for w in got)
        covered = torch.cat([w[:-1] for w in got])  # the x parts tile the span, in order
        assert torch.equal(covered, torch.from_numpy(stream[: expected * mult * T]))
    assert len(windows(dm.val_dataloader()[0])) == 40
    with pytest.raises(ValueError, match="set_name"):
        dm.val_windows_at(T, "nope")
    with pytest.raises(ValueError, match="length"):
        dm.val_windows_at(41 * T, "a")


def test_batch_size_of_longer_windows(tmp_path, word_tok, local_sources, val_file):
    dm = make(tmp_path, word_tok, local_sources, val_file, batch_size=8)
    x, _ = next(iter(dm.val_windows_at(4 * T, "a")))
    assert x.shape == (2, 4 * T)  # about the same tokens per batch
    x, _ = next(iter(dm.val_windows_at(4 * T, "a", batch_size=5)))
    assert x.shape == (5, 4 * T)
