"""What every command printed that is not the user's business (issue 25, item 9): Lightning's
litlogger tip, torch's LeafSpec deprecation, "Total FLOPs: 0" in the model summary and
ModelCheckpoint's "dirpath has changed" on an evaluation. fit, validate and generate run as a
user runs them (subprocesses) and print none of it; the FLOPs line is a true count."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"

pytestmark = pytest.mark.slow

NOISE = (
    "Tip: For seamless",
    "litlogger",
    "litmodels",
    "LeafSpec",
    "Total FLOPs: 0\n",
    "Total Flops",
    "The dirpath has changed",
)


def command(folder: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lit_sparse", *args],
        cwd=folder,
        env={**os.environ, "COLUMNS": "120"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def test_fit_validate_and_generate_print_no_noise(tmp_path):
    printed = {
        "fit": command(
            tmp_path,
            "fit",
            "--config",
            str(ROOT / "configs" / "staggered.yaml"),
            "--config",
            str(TINY),
            "--trainer.enable_model_summary",
            "true",
        )
    }
    run = tmp_path / "runs" / "staggered" / "version_0"
    checkpoint = run / "checkpoints" / "last.ckpt"
    printed["validate"] = command(
        tmp_path, "validate", "--config", str(run / "config.yaml"), "--ckpt_path", str(checkpoint)
    )
    printed["generate"] = command(tmp_path, "generate", str(run), "--max_new_tokens", "8")
    for name, text in printed.items():
        found = [line for line in NOISE if line in text]
        assert not found, f"{name} printed {found}:\n{text[-3000:]}"
    # the summary's FLOPs line is there and counts the forward of one training sequence
    [flops] = re.findall(r"Total FLOPs: ([\d.]+ ?[KMGT]?)", printed["fit"])
    assert float(flops.rstrip(" KMGT")) > 0, printed["fit"][-3000:]
