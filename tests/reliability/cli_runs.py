"""Running the CLI in tests: in this process (fast) or as a real process (to kill it)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

from lit_sparse.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "configs" / "tiny.yaml"


def config_args(variant: str = "fixed.yaml", *extra: str | Path) -> list[str]:
    """``--config configs/<variant> --config tiny.yaml`` plus more ``--config`` files."""
    args = ["--config", str(ROOT / "configs" / variant), "--config", str(TINY)]
    for path in extra:
        args += ["--config", str(path)]
    return args


def write_callbacks(path: Path, *callbacks: dict, **trainer) -> Path:
    """A config file replacing ``trainer.callbacks`` (and setting other trainer values)."""
    path.write_text(yaml.safe_dump({"trainer": {**trainer, "callbacks": list(callbacks)}}))
    return path


def checkpoint_every(steps: int, top_k: int = 1) -> dict:
    return {
        "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
        "init_args": {"every_n_train_steps": steps, "save_last": True, "save_top_k": top_k},
    }


OBSERVERS = [
    {"class_path": "lit_sparse.callbacks.AlphaTrajectory", "init_args": {"every_n_steps": 1}},
    {"class_path": "lit_sparse.callbacks.PositionLoss", "init_args": {"n_bins": 4}},
    {"class_path": "lit_sparse.callbacks.LengthExtrapolation"},
]


def fault(name: str, **init_args) -> dict:
    return {"class_path": f"tests.reliability.faults.{name}", "init_args": init_args}


def run_cli(args: list[str], capsys) -> tuple[int, list[str]]:
    """``main(args)`` in this process: exit status and the stderr lines (no seed notes)."""
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err.splitlines()
    return code, [line for line in err if line.strip() and not line.startswith("Seed set")]


def errors(lines: list[str]) -> list[str]:
    """The ``error: ...`` lines of a command's stderr."""
    return [line for line in lines if line.startswith("error: ")]


def run_process(workdir: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m lit_sparse <args>`` as its own process (it can be killed)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(_HANDOFF, None)
    return subprocess.run(
        [sys.executable, "-m", "lit_sparse", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


_HANDOFF = "LIT_SPARSE_RUN"


def tracebacks(text: str) -> bool:
    return "Traceback (most recent call last)" in text


def copy_run(run: Path, workdir: Path) -> Path:
    """A copy of a finished run's experiment under ``workdir/runs/<name>``."""
    target = workdir / "runs" / run.parent.name / run.name
    shutil.copytree(run, target)
    return target


def flip_bit(checkpoint: Path, record_suffix: str = "data/0", offset: int = 16) -> str:
    """Flip one bit inside a tensor record of a checkpoint; returns the record's name."""
    with zipfile.ZipFile(checkpoint) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith(record_suffix))
    data = bytearray(checkpoint.read_bytes())
    name_len, extra_len = struct.unpack(
        "<HH", data[info.header_offset + 26 : info.header_offset + 30]
    )
    start = info.header_offset + 30 + name_len + extra_len
    data[start + min(offset, info.file_size - 1)] ^= 0x04
    checkpoint.write_bytes(bytes(data))
    return info.filename
