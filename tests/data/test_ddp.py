"""Under real DDP (2 CPU processes, ddp_fork): each rank its own training stream, and the
ranks' validation batches partition the held-out windows (no padding, no duplicates). The
ranks are forks of this process (ddp_spawn's fresh interpreters import torch and Lightning
again: 14 s of CPU); what they compute is the same."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from lit_sparse.data import SourceConfig, TextDataModule

pytestmark = pytest.mark.slow


def _dm(tmp_path, tok, paths) -> TextDataModule:
    return TextDataModule(
        sources=[
            SourceConfig(
                name="a", path="json", data_files=str(paths["a"]), weight=0.5, val_tokens=999
            ),
            SourceConfig(
                name="c", path="parquet", data_files=str(paths["c"]), text_field="body", weight=0.5
            ),
        ],
        tokenizer=str(tok),
        seq_len=16,
        batch_size=4,
        cache_dir=str(tmp_path / "cache"),
    )


class Recorder(pl.LightningModule):
    """Saves the batches each rank sees."""

    def __init__(self, vocab: int, out: str) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, 4)
        self.out_dir = out
        self.train_x: list = []
        self.val_x: list = []

    def training_step(self, batch, batch_idx):
        self.train_x.append(batch[0].clone())
        return self.emb(batch[0]).sum() * 0.0

    def validation_step(self, batch, batch_idx):
        self.val_x.append(batch[0].clone())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def on_fit_end(self):
        torch.save(
            {"train": self.train_x, "val": self.val_x}, f"{self.out_dir}/rank{self.global_rank}.pt"
        )


def test_ddp_streams_and_validation_shares(tmp_path, word_tok, local_sources):
    dm = _dm(tmp_path, word_tok, local_sources)
    dm.prepare_data()
    reference = _dm(tmp_path, word_tok, local_sources)
    reference.setup("fit")
    all_windows = [x for x, _ in reference.val_dataloader()[0]]
    all_windows = torch.cat(all_windows)
    assert len(all_windows) == 998 // 16

    model = Recorder(dm.vocab_size, str(tmp_path))
    trainer = pl.Trainer(
        strategy="ddp_fork",
        accelerator="cpu",
        devices=2,
        max_steps=3,
        val_check_interval=3,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=dm)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert len(r0["train"]) == len(r1["train"]) == 3
    assert not any(torch.equal(a, b) for a, b in zip(r0["train"], r1["train"], strict=True))
    v0, v1 = torch.cat(r0["val"]), torch.cat(r1["val"])
    assert len(v0) + len(v1) == len(all_windows)  # no padding, no duplicates
    assert torch.equal(v0, all_windows[0::2]) and torch.equal(v1, all_windows[1::2])
