"""Running the CLI in tests: in this process (fast) or as a real process (to kill it)."""

from __future__ import annotations

import json
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


class ForkServer:
    """``python -m lit_sparse <args>`` as a fork of one process that has imported torch and
    Lightning (the 9 s of CPU a fresh process spends before its first line of work), for the
    tests that kill fits or run several at once: what a command leaves on disk is the same,
    its start is ~0.1 s. The ranks a DDP or FSDP2 command launches are forks of it too
    (``tests/reliability/fork_server.py``). :meth:`start`, then :meth:`poll` or
    :meth:`kill_after` (the last command started, or the one of ``pid``)."""

    def __init__(self, **env: str):
        env = {**os.environ, "PYTHONPATH": str(ROOT), **env}  # the fault callbacks import
        env.pop(_HANDOFF, None)
        self.process = subprocess.Popen(
            [sys.executable, "-c", (Path(__file__).parent / "fork_server.py").read_text()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.pid = None

    def _ask(self, **question) -> dict:
        self.process.stdin.write(json.dumps(question) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"the fork server ended (exit {self.process.wait()})"
        return json.loads(answer)

    def start(
        self, workdir: Path, *args: str, name: str | None = None, own_group: bool = False
    ) -> tuple[Path, Path]:
        """Fork ``python -m lit_sparse <args>`` in ``workdir``: the files of its stdout and
        stderr (beside ``workdir``, named after it and ``name``). Its pid is :attr:`pid`;
        ``own_group``: in a process group of its own (its pid), which the processes it starts
        join (as ``start_new_session``, for ``os.killpg``)."""
        stem = workdir.name if name is None else f"{workdir.name}.{name}"
        out = {stream: workdir.parent / f"{stem}.{stream}" for stream in ("stdout", "stderr")}
        job = {"args": list(args), "cwd": str(workdir), "own_group": own_group}
        job.update({k: str(v) for k, v in out.items()})
        self.pid = self._ask(run=job)["pid"]
        return out["stdout"], out["stderr"]

    def poll(self, pid: int | None = None) -> int | None:
        """The command's exit status (negative: the signal that killed it), None if running."""
        return self._ask(poll=pid or self.pid)["status"]

    def kill_after(self, seconds: float, pid: int | None = None) -> int:
        """Wait up to ``seconds`` for the command to end, then SIGKILL it: its exit status."""
        return self._ask(kill_after=seconds, pid=pid or self.pid)["status"]

    def run(self, workdir: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        """:func:`run_process`, forked: the command to its end (or killed at ``timeout``)."""
        stdout, stderr = self.start(workdir, *args)
        code = self.kill_after(timeout)
        return subprocess.CompletedProcess(args, code, stdout.read_text(), stderr.read_text())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


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
