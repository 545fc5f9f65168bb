"""Training windows: token shares match the weights, streams are seeded per rank, workers
split the stream without duplicates, and the stream resumes exactly from the state."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lit_sparse.data import SourceConfig, TextDataModule
from lit_sparse.data.mixture import MixtureWindows

from .conftest import PREFIXES, prefix_range
from .fresh_process import in_fresh_process


def mixture_sources(paths, weights=(0.5, 0.3, 0.2)) -> list[SourceConfig]:
    wa, wb, wc = weights
    return [
        SourceConfig(name="a", path="json", data_files=str(paths["a"]), weight=wa),
        SourceConfig(
            name="b",
            path="text",
            data_files=str(paths["b"] / "*.txt"),
            weight=wb,
            load_kwargs={"sample_by": "document"},
        ),
        SourceConfig(
            name="c", path="parquet", data_files=str(paths["c"]), text_field="body", weight=wc
        ),
    ]


def make_dm(tmp_path, word_tok, paths, **kwargs) -> TextDataModule:
    args = {"seq_len": 128, "batch_size": 64, "cache_dir": str(tmp_path / "cache")}
    args.update(kwargs)
    dm = TextDataModule(
        sources=mixture_sources(paths, args.pop("weights", (0.5, 0.3, 0.2))),
        tokenizer=str(word_tok),
        **args,
    )
    dm.prepare_data()
    dm.setup("fit")
    return dm


def window_source(x: torch.Tensor) -> np.ndarray:
    """Which source each window came from (its words' prefix; EOS tokens ignored)."""
    out = np.full(x.shape[0], -1)
    for k, p in enumerate(PREFIXES):
        r = prefix_range(p)
        in_range = ((x >= r.start) & (x < r.stop)).sum(dim=1)
        out[(in_range > 0).numpy()] = k
        assert torch.all((in_range == 0) | (in_range == (x != 0).sum(dim=1)))  # one source
    return out


def test_token_shares_match_weights(tmp_path, word_tok, local_sources):
    weights = (0.5, 0.3, 0.2)
    dm = make_dm(tmp_path, word_tok, local_sources, weights=weights)
    # documents differ in length by ~1000x between a and b, and files differ in size
    counts = np.zeros(3)
    tokens = 0
    it = iter(dm.train_dataloader())
    while tokens < 1_000_000:
        x, y = next(it)
        src = window_source(x)
        assert (src >= 0).all()
        counts += np.bincount(src, minlength=3) * x.shape[1]
        tokens += x.numel()
    shares = counts / counts.sum()
    assert np.abs(shares - np.array(weights)).max() < 0.02, shares


def test_batches_shape_dtype_and_shift(tmp_path, word_tok, local_sources):
    dm = make_dm(tmp_path, word_tok, local_sources, seq_len=32, batch_size=5)
    x, y = next(iter(dm.train_dataloader()))
    assert x.shape == y.shape == (5, 32)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert int(x.max()) < dm.vocab_size


def _take(loader, n):
    it = iter(loader)
    return [next(it) for _ in range(n)]


def take_with_workers(tmp_path, word_tok, paths, n, state):
    """The first ``n`` batches of a two-worker loader, resumed from ``state`` when given."""
    dm = make_dm(tmp_path, word_tok, paths, seq_len=16, batch_size=4, num_workers=2)
    if state is not None:
        dm.load_state_dict(state)
    return _take(dm.train_dataloader(), n)


def test_stream_is_seeded_per_rank(tmp_path, word_tok, local_sources):
    dm = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    a = torch.cat([x for x, _ in _take(dm.train_dataloader(), 3)])
    dm2 = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    b = torch.cat([x for x, _ in _take(dm2.train_dataloader(), 3)])
    assert torch.equal(a, b)  # same seed, same rank: same stream
    dm3 = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    dm3.trainer = SimpleNamespace(global_rank=1, world_size=2, training=False)
    c = torch.cat([x for x, _ in _take(dm3.train_dataloader(), 3)])
    assert not torch.equal(a, c)  # another rank draws another stream
    dm4 = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4, seed=7)
    d = torch.cat([x for x, _ in _take(dm4.train_dataloader(), 3)])
    assert not torch.equal(a, d)


@pytest.mark.slow  # starts a Python process
def test_workers_split_the_stream_without_duplicates(tmp_path, word_tok, local_sources):
    dm0 = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    ref = _take(dm0.train_dataloader(), 6)
    got = in_fresh_process(
        take_with_workers, tmp_path, word_tok, local_sources, 6, None, work_dir=tmp_path
    )
    for (x0, _), (x2, _) in zip(ref, got, strict=True):
        assert torch.equal(x0, x2)
    # and the windows are distinct draws (no worker repeats another's samples)
    ds = dm0.train_dataloader().dataset
    draws = [ds.draw(n) for n in range(24)]
    assert len(set(draws)) == 24


def test_draws_are_pure_functions_of_seed_rank_n(tmp_path, word_tok, local_sources):
    dm = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    ds = dm.train_dataloader().dataset
    again = MixtureWindows(ds.files, [0.5, 0.3, 0.2], 16, 4, seed=42, rank=0)
    assert [ds.draw(n) for n in (0, 5, 10**9)] == [again.draw(n) for n in (0, 5, 10**9)]
    other_rank = MixtureWindows(ds.files, [0.5, 0.3, 0.2], 16, 4, seed=42, rank=1)
    assert [ds.draw(n) for n in range(20)] != [other_rank.draw(n) for n in range(20)]


@pytest.mark.slow  # starts a Python process
def test_resume_exactly_from_state_dict(tmp_path, word_tok, local_sources):
    dm = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    it = iter(dm.train_dataloader())
    for _ in range(5):
        next(it)
    state = dm.state_dict()
    assert state["samples_consumed"] == 20
    expected = [next(it) for _ in range(4)]

    got = in_fresh_process(
        take_with_workers, tmp_path, word_tok, local_sources, 4, state, work_dir=tmp_path
    )
    for (xe, ye), (xg, yg) in zip(expected, got, strict=True):
        assert torch.equal(xe, xg) and torch.equal(ye, yg)
    # a fresh module without the state starts over
    fresh = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    assert not torch.equal(_take(fresh.train_dataloader(), 1)[0][0], expected[0][0])


def test_new_iteration_continues_the_stream(tmp_path, word_tok, local_sources):
    """A second epoch (new iter) must not replay the first one's samples."""
    dm = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    loader = dm.train_dataloader()
    first = _take(loader, 2)
    second = _take(loader, 2)
    ref = _take(
        make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4).train_dataloader(), 4
    )
    for (x, _), (xr, _) in zip(first + second, ref, strict=True):
        assert torch.equal(x, xr)


def test_load_state_dict_rejects_garbage(tmp_path, word_tok, local_sources):
    dm = make_dm(tmp_path, word_tok, local_sources, seq_len=16, batch_size=4)
    with pytest.raises(ValueError, match="samples_consumed"):
        dm.load_state_dict({"samples_consumed": -3})


def _tiny_module(seen: list):
    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self, vocab: int) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(vocab, 8)
            self.out = torch.nn.Linear(8, vocab)

        def training_step(self, batch, batch_idx):
            x, y = batch
            seen.append(x.clone())
            logits = self.out(self.emb(x))
            return torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Tiny


def test_resume_through_a_trainer_checkpoint(tmp_path, word_tok, local_sources):
    """Fit 6 steps; resume from the step-3 checkpoint: steps 4-6 see the same batches
    (Lightning prefetches one batch; the count must not include it)."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    def trainer(max_steps, ckpt_dir=None):
        callbacks = []
        if ckpt_dir is not None:
            callbacks.append(
                ModelCheckpoint(
                    dirpath=ckpt_dir, every_n_train_steps=3, save_top_k=-1, filename="{step}"
                )
            )
        return pl.Trainer(
            max_steps=max_steps,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            callbacks=callbacks,
            enable_checkpointing=ckpt_dir is not None,
        )

    seen: list = []
    dm = make_dm(tmp_path, word_tok, local_sources, seq_len=8, batch_size=2)
    model = _tiny_module(seen)(dm.vocab_size)
    trainer(6, tmp_path / "ckpt").fit(model, datamodule=dm)
    assert len(seen) == 6
    ckpt = tmp_path / "ckpt" / "step=3.ckpt"
    assert ckpt.exists()
    saved = torch.load(ckpt, weights_only=False)
    assert saved["TextDataModule"]["samples_consumed"] == 6

    seen2: list = []
    dm2 = make_dm(tmp_path, word_tok, local_sources, seq_len=8, batch_size=2)
    model2 = _tiny_module(seen2)(dm2.vocab_size)
    trainer(6).fit(model2, datamodule=dm2, ckpt_path=str(ckpt))
    assert len(seen2) == 3
    for a, b in zip(seen[3:], seen2, strict=True):
        assert torch.equal(a, b)
