"""Sharded checkpoints: an FSDP2 run's folder (Lightning's ``*.distcp`` shards, ``.metadata`` index
and ``meta.pt``; lit_sparse's ``crc32.json``: every file's size and CRC-32)."""

from __future__ import annotations

import io
import json
import os
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

METADATA = "meta.pt"
"""Lightning's file of everything but the weights and optimizer states."""

CHECKSUMS = "crc32.json"
"""lit_sparse's record of every file's size and CRC-32."""

_CHUNK = 1 << 22

_INDEX = ".metadata"
"""torch.distributed.checkpoint's index of the shards."""


def is_sharded_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a sharded checkpoint folder (any of its files, incomplete or not)."""
    path = Path(path)
    return path.is_dir() and (
        any((path / name).is_file() for name in (METADATA, _INDEX, CHECKSUMS))
        or any(path.glob("*.distcp"))
    )


def is_checkpoint(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a checkpoint: a file, or the folder of a sharded one."""
    return Path(path).is_file() or is_sharded_checkpoint(path)


def checkpoint_bytes(path: str | os.PathLike) -> int:
    """A checkpoint's size on disk: the file's, or the sum of a sharded folder's files."""
    path = Path(path)
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def file_checksums(folder: Path, names: list[str]) -> dict[str, list[int]]:
    """name -> [size, CRC-32] of ``names`` in ``folder``."""
    return {name: [(folder / name).stat().st_size, _crc32(folder / name)] for name in names}


def folder_problem(path: Path, read_files: bool = True) -> str | None:
    """Why the folder ``path`` is not a whole sharded checkpoint (None: it is): every file's size
    and (``read_files``) CRC-32 by ``crc32.json``, else the index and each tensor record's zip."""
    if not (path / METADATA).is_file():
        return (
            f"its {METADATA} is missing (the step, hyperparameters and loop states: the shards "
            "alone can be neither resumed nor read)"
        )
    record = path / CHECKSUMS
    if record.is_file():
        try:
            files = json.loads(record.read_text())["files"]
        except (ValueError, KeyError, TypeError, OSError) as err:
            return f"{CHECKSUMS} is not readable ({err})"
        for name, (size, crc) in sorted(files.items()):
            file = path / name
            if not file.is_file():
                return f"its file {name!r} is missing"
            if file.stat().st_size != size:
                return f"its file {name!r} has {file.stat().st_size} bytes, {size} were written"
            if read_files and _crc32(file) != crc:
                return f"its file {name!r} fails its CRC-32 check (a changed bit or a partial copy)"
        return None
    try:
        index = dcp.FileSystemReader(str(path)).read_metadata()
    except Exception as err:  # a truncated or foreign .metadata
        return f"its index .metadata is not readable ({type(err).__name__}: {err})"
    for item in index.storage_data.values():
        file = path / item.relative_path
        if not file.is_file() or file.stat().st_size < item.offset + item.length:
            return f"its shard {item.relative_path!r} is missing or truncated"
    return _damaged_record(path, index) if read_files else None


def _damaged_record(path: Path, index: Any) -> str | None:
    """Why a shard without ``crc32.json`` is damaged (a tensor record's zip CRC-32), or None."""
    by_file: dict[str, list[tuple[Any, Any]]] = {}
    for key, item in index.storage_data.items():
        by_file.setdefault(item.relative_path, []).append((item.offset, item.length, key))
    for name, items in sorted(by_file.items()):
        with open(path / name, "rb") as handle:
            for offset, length, key in sorted(items, key=lambda found: found[:2]):
                handle.seek(offset)
                record = handle.read(length)
                if record[:4] != b"PK\x03\x04":  # a record of bytes (not a tensor): no CRC
                    continue
                try:
                    with zipfile.ZipFile(io.BytesIO(record)) as archive:
                        damaged = archive.testzip()
                    why = None if damaged is None else f"its entry {damaged!r} fails its CRC-32"
                except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as err:
                    why = f"it is not readable: {err}"
                if why is not None:
                    return (
                        f"its shard {name!r} is damaged: the record of {key.fqn!r} at byte "
                        f"{offset}: {why} (a changed bit or a partial copy)"
                    )
    return None


def read_folder(path: str | os.PathLike, weights: bool = True) -> dict[str, Any]:
    """A sharded checkpoint as one CPU dict: ``meta.pt``'s values and (``weights``) all weights."""
    path = Path(path)
    checkpoint = torch.load(path / METADATA, map_location="cpu", weights_only=True)
    if weights:
        index = dcp.FileSystemReader(str(path)).read_metadata()
        prefix = "state_dict."
        state = {
            key[len(prefix) :]: torch.empty(item.size, dtype=item.properties.dtype)
            for key, item in index.state_dict_metadata.items()
            if key.startswith(prefix) and isinstance(item, TensorStorageMetadata)
        }
        loaded = {"state_dict": state}
        with warnings.catch_warnings():  # that no_dist reads in one process, as asked
            warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
            dcp.load(loaded, checkpoint_id=str(path), no_dist=True)
        checkpoint["state_dict"] = loaded["state_dict"]
    return checkpoint
