"""Writes this folder's fixtures: run configs, checkpoints and each model's logits on a fixed
input, trained with the flat schedule options (``schedule: learned``, ``alpha_min``, ...) that
the schedule types replaced. It was run once, at commit c05557a, from the repository root:

    python tests/attention/legacy_schedules/make_fixtures.py

The tests load these files with today's code (tests/test_legacy.py).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
CASES = {
    "fixed": ["--model.attention.init_args.schedule", "fixed"],
    "coprime": [
        "--model.attention.init_args.schedule", "coprime",
        "--model.attention.init_args.alpha_min", "0.6",
        "--model.attention.init_args.alpha_max", "1.4",
    ],
    "custom": [
        "--model.attention.init_args.schedule", "custom",
        "--model.attention.init_args.alphas", "[1.7, 0.6, 1.2]",
    ],
    "learned": [
        "--model.attention.init_args.schedule", "learned",
        "--model.attention.init_args.alpha_init", "[0.8, 1.3, 1.1]",
    ],
    "gaussian": [
        "--model.attention.init_args.schedule", "learned",
        "--model.attention.init_args.rung_read", "gaussian",
        "--model.attention.init_args.rung_width_start", "6.0",
    ],
}  # fmt: skip


def main() -> None:
    from lit_sparse.module import LitLanguageModel

    for case, options in CASES.items():
        root = HERE / "runs"
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(
            [
                sys.executable, "-m", "lit_sparse", "fit",
                "--config", "configs/fixed.yaml", "--config", "tests/configs/tiny.yaml",
                "--data", "configs/data/mqar.yaml", "--data.init_args.vocab_size", "96",
                "--data.init_args.batch_size", "4", "--data.init_args.val_examples", "8",
                "--model.arch.n_layers", "3", "--trainer.max_steps", "3",
                "--trainer.logger.init_args.save_dir", str(root),
                "--trainer.logger.init_args.name", case, *options,
            ],
            check=True,
        )  # fmt: skip
        run = root / case / "version_0"
        out = HERE / case
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        shutil.copy(run / "config.yaml", out / "config.yaml")
        ckpt = torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)
        small = {
            k: ckpt[k] for k in ("state_dict", "hyper_parameters", "pytorch-lightning_version")
        }
        small.update(epoch=ckpt["epoch"], global_step=ckpt["global_step"])
        torch.save(small, out / "model.ckpt")
        model = LitLanguageModel.load_from_checkpoint(out / "model.ckpt").eval()
        tokens = torch.arange(64).remainder(96).unsqueeze(0)
        with torch.no_grad():
            torch.save(model.model(tokens), out / "logits.pt")
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
