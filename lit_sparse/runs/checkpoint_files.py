"""Checkpoint files as read: CRC-verified, safe loads of a file or a sharded folder, and the
tokenizer a checkpoint was trained with. Without Lightning, so that loading a run to generate,
export or score does not import it (lit_sparse.runs.checkpoints has the Lightning side)."""

from __future__ import annotations

import os
import pickle
import re
import zipfile
import zlib
from pathlib import Path
from typing import Any

import torch

from lit_sparse.errors import CheckpointError
from lit_sparse.runs.checkpoint_folders import (
    METADATA,
    folder_problem,
    is_checkpoint,
    is_sharded_checkpoint,
    read_folder,
)
from lit_sparse.runs.locks import is_global_rank_zero

__all__ = [
    "check_tokenizer",
    "checkpoint_tokenizer",
    "differences",
    "is_checkpoint",
    "read_checkpoint",
    "verify_checkpoint",
]

_VERIFIED: dict[tuple, None] = {}
"""Checkpoint versions verified, by path, device, inode, size and mtime (a rewrite: a new inode)."""


def _others(path: Path) -> str:
    others = sorted(p.name for p in path.parent.glob("*.ckpt") if p != path)
    return f"; other checkpoints there: {', '.join(others)}" if others else ""


def _unreadable(path: Path, reason: str) -> CheckpointError:
    return CheckpointError(
        f"ckpt_path={str(path)!r} cannot be read as a checkpoint, so it is not used "
        f"({reason}){_others(path)}"
    )


def _unusable(path: Path, err: OSError) -> CheckpointError:
    return CheckpointError(f"ckpt_path={str(path)!r}: {err.strerror or 'cannot be read'}")


def _verify_folder(path: Path) -> Path:
    """Verify a sharded checkpoint's folder: rank 0 reads every shard, other ranks check sizes."""
    files = sorted((p.name, p.stat()) for p in path.iterdir() if p.is_file())
    key = (str(path.resolve()), *((n, s.st_ino, s.st_size, s.st_mtime_ns) for n, s in files))
    if key in _VERIFIED:  # every file as it was (a shard rewritten since: verified again)
        return path
    if (path / METADATA).is_file():
        verify_checkpoint(path / METADATA)
    if (problem := folder_problem(path, read_files=is_global_rank_zero())) is not None:
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is damaged or incomplete, so it is not used: {problem}"
            f"{_others(path)}"
        )
    _VERIFIED[key] = None
    return path


def verify_checkpoint(path: str | os.PathLike) -> Path:
    """CheckpointError unless every zip CRC-32 of ``path`` matches (torch.load checks none)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as err:
        raise _unusable(path, err) from None
    if is_sharded_checkpoint(path):
        return _verify_folder(path)
    if not path.is_file():
        raise CheckpointError(f"ckpt_path={str(path)!r}: not a file")
    key = (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key in _VERIFIED:
        return path
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as err:
        raise _unreadable(path, f"truncated or corrupt: {err}") from None
    except OSError as err:
        raise _unusable(path, err) from None
    if damaged is not None:
        raise CheckpointError(
            f"ckpt_path={str(path)!r} is damaged, so it is not used: record {damaged!r} "
            f"fails its CRC-32 check (a changed bit or a partial copy){_others(path)}"
        )
    _VERIFIED[key] = None
    return path


def _load_failure(err: Exception) -> str:
    """Why torch.load refused a file, in one line, without its weights_only=False advice."""
    text = str(err)
    unsupported = re.search(r"Unsupported (?:global|operand)\S*(?: GLOBAL)? \S+", text)
    if isinstance(err, pickle.UnpicklingError) or unsupported:
        what = unsupported.group(0) if unsupported else text.splitlines()[0]
        return (
            "it holds objects a safe load refuses, so it was not written by lit_sparse or "
            f"has been altered: {what}"
        )
    return f"truncated or corrupt: {type(err).__name__}: {text.splitlines()[0] if text else ''}"


def read_checkpoint(path: str | os.PathLike, weights: bool = True) -> dict[str, Any]:
    """A verified checkpoint's dict on the CPU (memory-mapped); ``weights``: a folder's too."""
    path = Path(path)
    if not is_checkpoint(path):
        raise CheckpointError(f"ckpt_path={str(path)!r}: no such file")
    verify_checkpoint(path)
    try:
        if path.is_dir():
            return read_folder(path, weights=weights)
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # not a checkpoint, unpicklable content
        raise _unreadable(path, _load_failure(err)) from None


def differences(expected: Any, found: Any, prefix: str) -> list[str]:
    """'key: config a, checkpoint b' lines for nested dicts (``expected`` from the config); a
    ``{class_path, init_args}`` value of another class is one line, ``Linear(alpha_min=0.5)``."""
    if _is_spec(expected) and _is_spec(found) and expected["class_path"] == found["class_path"]:
        return differences(expected.get("init_args") or {}, found.get("init_args") or {}, prefix)
    if isinstance(expected, dict) and isinstance(found, dict) and not _is_spec(expected):
        lines = []
        for key in sorted(set(expected) | set(found)):
            lines += differences(expected.get(key), found.get(key), f"{prefix}.{key}")
        return lines
    if expected == found:
        return []
    return [f"{prefix}: config {_shown(expected)}, checkpoint {_shown(found)}"]


def _is_spec(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("class_path"), str)


def _shown(value: Any) -> str:
    if not _is_spec(value):
        return repr(value)
    args = ", ".join(f"{k}={_shown(v)}" for k, v in (value.get("init_args") or {}).items())
    return f"{value['class_path'].rpartition('.')[2]}({args})"


def checkpoint_tokenizer(checkpoint: dict[str, Any]) -> str | None:
    """The sha256 of the tokenizer a checkpoint was trained with (None: not recorded)."""
    for value in checkpoint.values():
        if isinstance(value, dict) and isinstance(value.get("tokenizer_sha256"), str):
            return value["tokenizer_sha256"]
    return None


def check_tokenizer(
    trained: str | None,
    sha256: str,
    spec: str,
    path: Any,
    hint: str = "use the run's own tokenizer",
) -> None:
    """CheckpointError unless the recorded digest ``trained`` (None: passes) is ``sha256``."""
    if trained is not None and trained != sha256:
        raise CheckpointError(
            f"ckpt_path={str(path)!r} was trained with another tokenizer than "
            f"data.tokenizer={spec!r} (sha256 {trained[:12]}... in the checkpoint, "
            f"{sha256[:12]}... here): token ids would mean other text; {hint}"
        )
