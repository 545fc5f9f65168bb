"""The token cache: reused across runs, rebuilt when the tokenizer or a source changes, and
never read silently when a file does not match its metadata."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import lit_sparse.data.datamodule as datamodule_mod
from lit_sparse.data import SourceConfig, TextDataModule
from lit_sparse.data.token_cache import file_sha256

from .conftest import word_tokenizer_json


@pytest.fixture
def builds(monkeypatch) -> list[str]:
    """Names of the sources tokenized (each call of build_source), in order."""
    calls: list[str] = []
    real = datamodule_mod.build_source

    def counting(plan, tok):
        calls.append(plan.source.name)
        return real(plan, tok)

    monkeypatch.setattr(datamodule_mod, "build_source", counting)
    return calls


def sources(paths, template: str | None = None) -> list[SourceConfig]:
    return [
        SourceConfig(
            name="a", path="json", data_files=str(paths["a"]), weight=0.6, val_tokens=3000
        ),
        SourceConfig(
            name="c",
            path="parquet",
            data_files=str(paths["c"]),
            weight=0.4,
            text_field="body" if template is None else "text",
            text_template=template,
        ),
    ]


def make(tmp_path, tok, paths, template=None, **kw) -> TextDataModule:
    return TextDataModule(
        sources=sources(paths, template),
        tokenizer=str(tok),
        seq_len=32,
        batch_size=4,
        cache_dir=str(tmp_path / "cache"),
        **kw,
    )


def token_files(tmp_path) -> dict[str, tuple[int, int]]:
    """Every token file of the cache: name -> (inode, mtime_ns)."""
    out = {}
    for p in sorted((tmp_path / "cache" / "tokens").glob("*.bin")):
        st = p.stat()
        out[p.name] = (st.st_ino, st.st_mtime_ns)
    return out


def batch(dm):
    return next(iter(dm.train_dataloader()))[0]


def test_second_run_reuses_the_cache(tmp_path, word_tok, local_sources, builds, no_network):
    """(Local sources need no network either.)"""
    dm = make(tmp_path, word_tok, local_sources)
    dm.prepare_data()
    dm.setup("fit")
    assert builds == ["a", "c"]
    files = token_files(tmp_path)
    assert len(files) == 3  # a.train, a.val, c.train
    first = batch(dm)

    again = make(tmp_path, word_tok, local_sources)
    again.prepare_data()
    again.setup("fit")
    assert builds == ["a", "c"]  # no tokenization the second time
    assert token_files(tmp_path) == files  # same files, untouched
    assert (batch(again) == first).all()


def test_a_first_tokenization_says_so_when_it_starts_and_ends(
    tmp_path, word_tok, local_sources, capfd
):
    """The one-time step is announced on stderr (the progress bar would sit still); a second
    run that reads the cache says nothing."""
    make(tmp_path, word_tok, local_sources).prepare_data()
    lines = capfd.readouterr().err.splitlines()
    started = [line for line in lines if line.startswith("tokenizing ")]
    done = [line for line in lines if line.startswith("tokenized ")]
    assert [line.split()[1] for line in started] == ["a", "c"]
    assert all("once" in line and str(tmp_path / "cache" / "tokens") in line for line in started)
    assert [line.split()[1] for line in done] == ["a", "c"]
    assert re.search(r"in \d+ s: train [\d,]+ tokens, val 3,000 tokens$", done[0]), done[0]

    make(tmp_path, word_tok, local_sources).prepare_data()
    assert "tokeniz" not in capfd.readouterr().err


def test_metadata_describes_the_file(tmp_path, word_tok, local_sources):
    dm = make(tmp_path, word_tok, local_sources)
    dm.prepare_data()
    for meta_path in (tmp_path / "cache" / "tokens").glob("*.json"):
        meta = json.loads(meta_path.read_text())
        bin_path = meta_path.with_suffix(".bin")
        assert meta["dtype"] == "uint16"
        assert meta["file_bytes"] == bin_path.stat().st_size == 2 * meta["num_tokens"]
        assert meta["sha256"] == file_sha256(bin_path)
        assert len(meta["tokenizer_sha256"]) == 64
        assert meta["source_spec"]["path"] in ("json", "parquet")
        tokens = np.fromfile(bin_path, dtype=np.uint16)
        # every document ends with <|endoftext|>, except one cut by a token budget
        assert (tokens[-1] == 0) != meta["truncated"]
        assert (tokens == 0).sum() == meta["num_documents"] - meta["truncated"]
    # the held-out part has exactly its budget; training skips the held-out documents
    a_val = json.loads(next((tmp_path / "cache" / "tokens").glob("json-*.val.json")).read_text())
    assert a_val["num_tokens"] == 3000


def test_changing_the_tokenizer_rebuilds(tmp_path, word_tok, local_sources, builds):
    make(tmp_path, word_tok, local_sources).prepare_data()
    before = token_files(tmp_path)
    other = word_tokenizer_json(tmp_path / "tok2" / "tokenizer.json", extra=("zzz",))
    dm = make(tmp_path, other, local_sources)
    dm.prepare_data()
    assert builds == ["a", "c", "a", "c"]
    after = token_files(tmp_path)
    assert set(after) > set(before) and len(after) == 6  # new keys, old files untouched


def test_changing_a_source_rebuilds_only_it(tmp_path, word_tok, local_sources, builds):
    make(tmp_path, word_tok, local_sources).prepare_data()
    # a different text template for source c
    make(tmp_path, word_tok, local_sources, template="{body}").prepare_data()
    assert builds == ["a", "c", "c"]
    # new content in a local file of source a (same config)
    p = local_sources["a"]
    p.write_text(p.read_text() + json.dumps({"text": "a1 a2 a3"}) + "\n")
    make(tmp_path, word_tok, local_sources).prepare_data()
    assert builds == ["a", "c", "c", "a"]
    # the weight and the name are not part of the content: no rebuild
    srcs = sources(local_sources)
    srcs[1] = SourceConfig(
        name="renamed",
        path="parquet",
        data_files=str(local_sources["c"]),
        weight=0.9,
        text_field="body",
    )
    TextDataModule(
        sources=srcs, tokenizer=str(word_tok), seq_len=32, cache_dir=str(tmp_path / "cache")
    ).prepare_data()
    assert builds == ["a", "c", "c", "a"]


def _train_bin(tmp_path, prefix="parquet-") -> Path:
    return next((tmp_path / "cache" / "tokens").glob(f"{prefix}*.train.bin"))


@pytest.mark.parametrize("damage", ["truncate", "flip", "drop_meta", "bad_meta"])
def test_damaged_cache_is_detected_and_rebuilt(tmp_path, word_tok, local_sources, builds, damage):
    make(tmp_path, word_tok, local_sources).prepare_data()
    path = _train_bin(tmp_path)
    good = path.read_bytes()
    meta = path.with_suffix(".json")
    if damage == "truncate":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "flip":  # same size, different bytes: only the checksum sees it
        path.write_bytes(good[:100] + bytes(b ^ 0xFF for b in good[100:110]) + good[110:])
    elif damage == "drop_meta":
        meta.unlink()
    else:
        meta.write_text("{not json")
    dm = make(tmp_path, word_tok, local_sources)
    dm.prepare_data()
    assert builds == ["a", "c", "c"]
    assert path.read_bytes() == good


def test_setup_without_prepare_rebuilds_a_truncated_file(tmp_path, word_tok, local_sources, builds):
    make(tmp_path, word_tok, local_sources).prepare_data()
    path = _train_bin(tmp_path)
    good = path.read_bytes()
    path.write_bytes(good[:-2])
    dm = make(tmp_path, word_tok, local_sources)
    dm.setup("fit")  # single process: rebuilds instead of reading a short file
    assert builds == ["a", "c", "c"]
    assert path.read_bytes() == good


def test_setup_under_ddp_refuses_a_damaged_cache(tmp_path, word_tok, local_sources):
    make(tmp_path, word_tok, local_sources).prepare_data()
    path = _train_bin(tmp_path)
    path.write_bytes(path.read_bytes()[:-2])
    dm = make(tmp_path, word_tok, local_sources)
    dm.trainer = SimpleNamespace(global_rank=1, world_size=2)
    with pytest.raises(RuntimeError, match="not usable"):
        dm.setup("fit")


def test_failed_build_leaves_no_partial_files(tmp_path, word_tok, local_sources, monkeypatch):
    import lit_sparse.data.token_cache as tc

    real = tc.iter_text_batches

    def failing(src, part, batch_docs=256):
        for i, b in enumerate(real(src, part, batch_docs)):
            if i == 3:
                raise OSError("disk on fire")
            yield b

    monkeypatch.setattr(tc, "iter_text_batches", failing)
    dm = make(tmp_path, word_tok, local_sources)
    with pytest.raises(OSError, match="disk on fire"):
        dm.prepare_data()
    leftovers = list((tmp_path / "cache" / "tokens").iterdir())
    assert leftovers == []  # no temporary files, no token files without metadata
    monkeypatch.setattr(tc, "iter_text_batches", real)
    dm.prepare_data()
    dm.setup("fit")
    assert len(token_files(tmp_path)) == 3


def test_crash_never_leaves_a_partial_file_under_the_final_name(
    tmp_path, word_tok, local_sources, monkeypatch
):
    """A build killed mid-way (no cleanup runs) leaves the previous file as it was; the next
    run sees the damage and rebuilds; a day-old temporary file is swept."""
    import lit_sparse.data.token_cache as tc

    make(tmp_path, word_tok, local_sources).prepare_data()
    path = _train_bin(tmp_path, "json-")
    good = path.read_bytes()
    damaged = good[:50] + bytes(b ^ 0xFF for b in good[50:60]) + good[60:]
    path.write_bytes(damaged)  # forces a rebuild (checksum)

    real = tc.iter_text_batches

    def killed(src, part, batch_docs=256):
        for i, b in enumerate(real(src, part, batch_docs)):
            if i == 8:
                raise KeyboardInterrupt  # stands in for SIGKILL: see abort() below
            yield b

    monkeypatch.setattr(tc, "iter_text_batches", killed)
    monkeypatch.setattr(tc._AtomicTokenWriter, "abort", lambda self: self.file.file.close())
    with pytest.raises(KeyboardInterrupt):
        make(tmp_path, word_tok, local_sources).prepare_data()
    assert path.read_bytes() == damaged  # never a partial file under the final name
    temporaries = list(path.parent.glob(".*.tmp-*"))
    assert temporaries  # what a killed process leaves behind

    monkeypatch.undo()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # the pid of a writer that no longer exists
    old = 1_000_000_000
    for t in temporaries:
        orphan = t.with_name(re.sub(r"tmp-\d+-", f"tmp-{dead.pid}-", t.name))
        t.rename(orphan)
        os.utime(orphan, (old, old))
    make(tmp_path, word_tok, local_sources).prepare_data()
    assert path.read_bytes() == good
    assert not list(path.parent.glob(".*.tmp-*"))


def test_head_held_out_is_the_stream_head(tmp_path, word_tok, local_sources):
    """val = the first val_tokens tokens of the stream; training starts at the document
    after the one the budget cut: no held-out token is trained on."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(word_tok))
    stream = []
    for line in local_sources["a"].read_text().splitlines():
        stream.append(tok.encode(json.loads(line)["text"], add_special_tokens=False).ids + [0])
    dm = make(tmp_path, word_tok, local_sources)
    dm.prepare_data()
    val = np.fromfile(next((tmp_path / "cache" / "tokens").glob("json-*.val.bin")), np.uint16)
    train = np.fromfile(next((tmp_path / "cache" / "tokens").glob("json-*.train.bin")), np.uint16)
    flat = [t for doc in stream for t in doc]
    assert val.tolist() == flat[:3000]
    n_val_docs = next(i for i in range(len(stream)) if sum(map(len, stream[: i + 1])) >= 3000)
    rest = [t for doc in stream[n_val_docs + 1 :] for t in doc]
    assert train.tolist() == rest


def test_uint32_for_large_vocabularies(tmp_path, local_sources):
    big = word_tokenizer_json(tmp_path / "big" / "tokenizer.json", words_per_prefix=22_000)
    dm = TextDataModule(
        sources=[SourceConfig(name="a", path="json", data_files=str(local_sources["a"]))],
        tokenizer=str(big),
        seq_len=16,
        cache_dir=str(tmp_path / "cache"),
    )
    assert dm.tokenizer_size == 66_002 and dm.vocab_size == 66_048
    dm.prepare_data()
    meta = json.loads(next((tmp_path / "cache" / "tokens").glob("*.train.json")).read_text())
    assert meta["dtype"] == "uint32"
    dm.setup("fit")
    x, _ = next(iter(dm.train_dataloader()))
    assert int(x.max()) < dm.vocab_size


def test_cache_dir_default_from_environment(tmp_path, monkeypatch, word_tok, local_sources):
    monkeypatch.setenv("LIT_SPARSE_CACHE", str(tmp_path / "envcache"))
    dm = TextDataModule(sources=sources(local_sources), tokenizer=str(word_tok), seq_len=32)
    assert dm.cache_dir == tmp_path / "envcache"
    dm.prepare_data()
    assert len(os.listdir(tmp_path / "envcache" / "tokens")) == 6
